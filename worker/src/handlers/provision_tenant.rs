//! `provision-tenant`: ensures the tenant's search index, materializes its capability
//! sets, attaches its members, then flips it `creating → active` with the job's success.
//! Every step inserts only what is missing, so a re-run after a crash changes nothing
//! that the first run did.

use async_trait::async_trait;
use diesel_async::{AsyncConnection, AsyncPgConnection};
use quire_shared::catalogue::{JobType, ProvisionTenantPayload};
use quire_shared::db::jobs::Job;
use quire_shared::db::{DbError, members, search_indexes, tenants};
use quire_shared::states::TenantStatus;
use tokio_util::sync::CancellationToken;

use super::JobHandler;
use super::guards::{self, database_unavailable};
use crate::context::WorkerContext;
use crate::outcome::JobError;

pub struct ProvisionTenant {
    pub search_language: String,
}

#[async_trait]
impl JobHandler for ProvisionTenant {
    fn job_type(&self) -> JobType {
        JobType::ProvisionTenant
    }

    async fn run(
        &self,
        context: &WorkerContext,
        job: &Job,
        _cancelled: &CancellationToken,
    ) -> Result<(), JobError> {
        let payload: ProvisionTenantPayload = guards::payload(job)?;
        let mut conn = context.pool.get().await.map_err(database_unavailable)?;
        let language = self.search_language.as_str();
        conn.transaction::<_, DbError, _>(async |conn| {
            search_indexes::ensure(conn, job.tenant_id, language).await?;
            members::materialize(conn, job.tenant_id, &payload.members).await
        })
        .await
        .map_err(database_unavailable)
    }

    fn writes_on_success(&self) -> bool {
        true
    }

    async fn commit_success(&self, conn: &mut AsyncPgConnection, job: &Job) -> Result<(), DbError> {
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
