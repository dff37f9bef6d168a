//! `delete-tenant`: checks the signed request again (v2 only, constant-time signature
//! over every field, flags, tenant name and state, age, single-use nonce), then wipes the
//! tenant: its other jobs and every stored object; finally, with the job's success and in
//! its transaction, its rows and search index, and removes the tenant or leaves it in the
//! requested state with an empty index.
//!
//! Order matters for a re-run after a crash: objects go before the rows that name them,
//! so a crash never leaves an object nothing points at; every step is idempotent, and the
//! nonce is bound to this job, so its own retry may proceed where any other job may not.
//!
//! No write lands after the wipe: every writer holds the tenant row and re-checks its
//! state and generation in its own transaction (`actions::hold_tenant`), and the tenant
//! has been `deleting` since before this job was queued. The last step locks the tenant
//! row `FOR UPDATE` before it deletes the rows, so whatever committed before it is
//! deleted with the rest, and the removal of the tenant never meets a row of it that a
//! foreign key would refuse: the tenant is never left `deleting` by a late row.

use std::time::Duration;

use async_trait::async_trait;
use diesel_async::AsyncPgConnection;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::db::jobs::Job;
use crate::db::tenants::TenantLock;
use crate::db::{DbError, nonces, search_indexes, tenant_data, tenants};
use crate::jobs::{BackgroundJob, Description, JobContext, JobError, RetryClass};
use crate::secret::Secret;
use crate::signing::{DeletionAction, TenantDeletionRequest};
use crate::states::TenantStatus;
use crate::storage::StorageKey;
use crate::actions::tenants::DELETION_NONCE_PURPOSE;

/// Payload of `delete-tenant`: the signed request as the operator sent it.
pub type DeleteTenant = TenantDeletionRequest;

/// Every check of the request; nothing is touched before all of them passed.
async fn authorize(
    server_secret: &Secret,
    conn: &mut AsyncPgConnection,
    job: &Job,
    request: &DeleteTenant,
) -> Result<(), JobError> {
    let tenant = tenants::find_tenant(conn, job.tenant_id)
        .await
        .map_err(JobError::database)?
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
        server_secret.expose().as_bytes(),
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
    .map_err(JobError::database)?;
    if !nonce_is_ours {
        return Err(JobError::permanent(
            "nonce_replayed",
            "the signed deletion request was used before",
        ));
    }
    Ok(())
}

#[async_trait]
impl BackgroundJob for TenantDeletionRequest {
    const JOB_TYPE: &'static str = "delete-tenant";
    const DESCRIPTION: Description = Description {
        payload: &[
            ("version", "2 (a request without it is v1: refused)"),
            ("remove_tenant", "boolean"),
            ("tenant_name", "string"),
            ("action", "\"delete\" | \"reset\""),
            ("nonce", "32 lowercase hex digits"),
            ("issued_at", "RFC 3339 date-time"),
            ("signature", "64 lowercase hex digits (HMAC-SHA256 of every other field)"),
            ("final_status", "\"active\" | \"suspended\" (optional)"),
        ],
        enqueued_by: "admin deletion or reset request (tenant deleting)",
        work: "verify the signed request, wipe storage, index and rows, then remove the tenant or leave it in final_status",
    };
    const RETRY: RetryClass = RetryClass::ShortLived;
    const TENANT_GUARD: Option<TenantStatus> = Some(TenantStatus::Deleting);
    const TIME_LIMIT: Duration = Duration::from_secs(1800);
    const WRITES_ON_SUCCESS: bool = true;

    async fn run(
        &self,
        context: &JobContext,
        job: &Job,
        cancelled: &CancellationToken,
    ) -> Result<(), JobError> {
        let request = self;
        let tenant_id = job.tenant_id;
        let mut conn = context.connection().await?;
        authorize(&context.settings.auth.jwt_secret, &mut conn, job, request).await?;
        if cancelled.is_cancelled() {
            return Ok(());
        }
        tenant_data::remove_other_jobs(&mut conn, tenant_id, job.id)
            .await
            .map_err(JobError::database)?;
        context
            .store
            .delete_prefix(&StorageKey::tenant_prefix(tenant_id))
            .await
            .map_err(JobError::storage_unavailable)?;
        tracing::info!(action = request.action.as_str(), "tenant storage wiped");
        Ok(())
    }

    /// The rows go here, in the success transaction, after the tenant row is locked: no
    /// write can land between them and the tenant's removal or final state.
    async fn commit_success(
        &self,
        context: &JobContext,
        conn: &mut AsyncPgConnection,
        job: &Job,
    ) -> Result<(), DbError> {
        let tenant_id = job.tenant_id;
        tenants::lock_for_write(conn, tenant_id, TenantLock::Update).await?;
        tenant_data::delete_documents(conn, tenant_id).await?;
        search_indexes::drop(conn, tenant_id).await?;
        if self.action == DeletionAction::Delete {
            tenant_data::delete_membership(conn, tenant_id).await?;
        }
        tracing::info!(action = self.action.as_str(), "tenant data wiped");
        match self.final_status() {
            None => {
                tenants::delete_tenant_row(conn, job.tenant_id).await?;
                tracing::info!(tenant_id = %job.tenant_id, "tenant deleted");
            }
            Some(status) => {
                search_indexes::ensure(conn, job.tenant_id, &context.settings.search.language)
                    .await?;
                tenants::transition(conn, job.tenant_id, &[TenantStatus::Deleting], status).await?;
                tracing::info!(tenant_id = %job.tenant_id, %status, "tenant wiped and kept");
            }
        }
        Ok(())
    }
}
