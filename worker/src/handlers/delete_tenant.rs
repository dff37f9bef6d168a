//! `delete-tenant`: checks the signed request again (constant-time signature, flags,
//! tenant name and state, age, single-use nonce), then wipes the tenant: its other jobs,
//! every stored object, its search index and its rows; finally, with the job's success,
//! removes the tenant or leaves it in the requested state with an empty index.
//!
//! Order matters for a re-run after a crash: objects go before the rows that name them,
//! so a crash never leaves an object nothing points at; every step is idempotent, and the
//! nonce is bound to this job, so its own retry may proceed where any other job may not.

use async_trait::async_trait;
use diesel_async::{AsyncConnection, AsyncPgConnection};
use quire_shared::catalogue::{DeleteTenantPayload, JobType};
use quire_shared::db::jobs::Job;
use quire_shared::db::{DbError, nonces, search_indexes, tenant_data, tenants};
use quire_shared::secret::Secret;
use quire_shared::signing::DeletionAction;
use quire_shared::states::TenantStatus;
use quire_shared::storage::StorageKey;
use quire_shared::tenancy::DELETION_NONCE_PURPOSE;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use super::JobHandler;
use super::guards::{self, database_unavailable};
use crate::context::WorkerContext;
use crate::outcome::JobError;

pub struct DeleteTenant {
    pub server_secret: Secret,
    pub search_language: String,
}

impl DeleteTenant {
    /// Every check of the request; nothing is touched before all of them passed.
    async fn authorize(
        &self,
        conn: &mut AsyncPgConnection,
        job: &Job,
        request: &DeleteTenantPayload,
    ) -> Result<(), JobError> {
        let tenant = tenants::find_tenant(conn, job.tenant_id)
            .await
            .map_err(database_unavailable)?
            .ok_or(JobError::permanent(
                "tenant_missing",
                "the tenant does not exist",
            ))?;
        if tenant.status != TenantStatus::Deleting {
            return Err(JobError::permanent(
                "tenant_state",
                "the tenant is not marked for deletion",
            ));
        }
        if let Err(error) = request.verify(
            self.server_secret.expose().as_bytes(),
            job.tenant_id,
            OffsetDateTime::now_utc(),
        ) {
            tracing::warn!(code = error.code(), "tenant deletion request refused");
            return Err(JobError::permanent(
                error.code(),
                "the signed deletion request is not valid",
            ));
        }
        if tenant.name != request.tenant_name {
            return Err(JobError::permanent(
                "tenant_mismatch",
                "the signed deletion request names another tenant",
            ));
        }
        let nonce_is_ours = nonces::consume(
            conn,
            &request.nonce,
            DELETION_NONCE_PURPOSE,
            job.tenant_id,
            job.id,
        )
        .await
        .map_err(database_unavailable)?;
        if !nonce_is_ours {
            return Err(JobError::permanent(
                "nonce_replayed",
                "the signed deletion request was used before",
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl JobHandler for DeleteTenant {
    fn job_type(&self) -> JobType {
        JobType::DeleteTenant
    }

    async fn run(
        &self,
        context: &WorkerContext,
        job: &Job,
        cancelled: &CancellationToken,
    ) -> Result<(), JobError> {
        let request: DeleteTenantPayload = guards::payload(job)?;
        let tenant_id = job.tenant_id;
        let mut conn = context.pool.get().await.map_err(database_unavailable)?;
        self.authorize(&mut conn, job, &request).await?;
        if cancelled.is_cancelled() {
            return Ok(());
        }
        tenant_data::remove_other_jobs(&mut conn, tenant_id, job.id)
            .await
            .map_err(database_unavailable)?;
        context
            .store
            .delete_prefix(&StorageKey::tenant_prefix(tenant_id))
            .await
            .map_err(|error| {
                JobError::transient(
                    "storage_unavailable",
                    "the document storage is unavailable",
                    error,
                )
            })?;
        let wipe_members = request.action == DeletionAction::Delete;
        conn.transaction::<_, DbError, _>(async |conn| {
            tenant_data::delete_documents(conn, tenant_id).await?;
            search_indexes::drop(conn, tenant_id).await?;
            if wipe_members {
                tenant_data::delete_membership(conn, tenant_id).await?;
            }
            Ok(())
        })
        .await
        .map_err(database_unavailable)?;
        tracing::info!(action = request.action.as_str(), "tenant data wiped");
        Ok(())
    }

    fn writes_on_success(&self) -> bool {
        true
    }

    async fn commit_success(&self, conn: &mut AsyncPgConnection, job: &Job) -> Result<(), DbError> {
        // The payload was parsed by `run` already; a failure here cannot happen.
        let Ok(request) = guards::payload::<DeleteTenantPayload>(job) else {
            return Ok(());
        };
        match request.final_status() {
            None => {
                tenants::delete_tenant_row(conn, job.tenant_id).await?;
                tracing::info!(tenant_id = %job.tenant_id, "tenant deleted");
            }
            Some(status) => {
                search_indexes::ensure(conn, job.tenant_id, &self.search_language).await?;
                tenants::transition(conn, job.tenant_id, &[TenantStatus::Deleting], status).await?;
                tracing::info!(tenant_id = %job.tenant_id, %status, "tenant wiped and kept");
            }
        }
        Ok(())
    }
}
