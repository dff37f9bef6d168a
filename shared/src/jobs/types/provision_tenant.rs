//! `provision-tenant`: ensures the tenant's search index, materializes its capability
//! sets, attaches its members, then flips it `creating → active` with the job's success.
//! Every step inserts only what is missing, so a re-run after a crash changes nothing
//! that the first run did.

use std::time::Duration;

use async_trait::async_trait;
use diesel_async::{AsyncConnection, AsyncPgConnection};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::db::jobs::Job;
use crate::db::{DbError, members, search_indexes, tenants};
use crate::jobs::{BackgroundJob, Description, JobContext, JobError};
use crate::permissions::MemberSpec;
use crate::states::TenantStatus;

/// Payload of `provision-tenant`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvisionTenant {
    pub members: Vec<MemberSpec>,
}

#[async_trait]
impl BackgroundJob for ProvisionTenant {
    const JOB_TYPE: &'static str = "provision-tenant";
    const DESCRIPTION: Description = Description {
        payload: &[("members", "array of uuid or {user_id, capability_set}")],
        enqueued_by: "tenant creation (admin route or quire-admin tenant create)",
        work: "search index, capability sets, members, then active",
    };
    const TENANT_GUARD: Option<TenantStatus> = Some(TenantStatus::Creating);
    const TIME_LIMIT: Duration = Duration::from_secs(120);
    const WRITES_ON_SUCCESS: bool = true;

    async fn run(
        &self,
        context: &JobContext,
        job: &Job,
        _cancelled: &CancellationToken,
    ) -> Result<(), JobError> {
        let mut conn = context.connection().await?;
        let language = context.settings.search.language.as_str();
        conn.transaction::<_, DbError, _>(async |conn| {
            search_indexes::ensure(conn, job.tenant_id, language).await?;
            members::materialize(conn, job.tenant_id, &self.members).await
        })
        .await
        .map_err(JobError::database)
    }

    async fn commit_success(
        &self,
        _context: &JobContext,
        conn: &mut AsyncPgConnection,
        job: &Job,
    ) -> Result<(), DbError> {
        let activated = tenants::transition(
            conn,
            job.tenant_id,
            &[TenantStatus::Creating],
            TenantStatus::Active,
        )
        .await?;
        if activated.is_some() {
            tracing::info!(tenant_id = %job.tenant_id, "tenant provisioned and active");
        }
        Ok(())
    }
}
