//! The tenant lifecycle's two admin entry points, shared by the API and `quire-admin`:
//! creating a tenant (with its provision-tenant job) and accepting a signed deletion or
//! reset request (tenant `deleting` plus its delete-tenant job). Each is one transaction.

use diesel_async::{AsyncConnection, AsyncPgConnection};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::catalogue::{DeleteTenantPayload, JobType, ProvisionTenantPayload};
use crate::db::jobs::{self, Job, NewJob};
use crate::db::tenants::{self, Tenant};
use crate::db::{DbError, nonces};
use crate::permissions::MemberSpec;
use crate::signing::ProofError;
use crate::states::TenantStatus;

/// What the nonce of a tenant deletion is recorded as.
pub const DELETION_NONCE_PURPOSE: &str = "tenant-deletion";

#[derive(Debug, thiserror::Error)]
pub enum TenancyError {
    #[error("a tenant with this name exists already")]
    NameTaken,
    #[error("the tenant does not exist")]
    NotFound,
    #[error("the request names another tenant")]
    NameMismatch,
    #[error("the tenant is {0}; this needs another state")]
    WrongState(TenantStatus),
    #[error("a lifecycle job of this tenant is queued or running already")]
    JobActive,
    #[error("the nonce was used before")]
    NonceReplayed,
    #[error(transparent)]
    Proof(#[from] ProofError),
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<diesel::result::Error> for TenancyError {
    fn from(error: diesel::result::Error) -> Self {
        Self::Db(error.into())
    }
}

/// Inserts the tenant (`creating`) and its provision-tenant job.
pub async fn create_tenant(
    conn: &mut AsyncPgConnection,
    name: &str,
    members: Vec<MemberSpec>,
    max_attempts: i32,
    request_id: Option<String>,
) -> Result<(Tenant, Job), TenancyError> {
    conn.transaction::<_, TenancyError, _>(async |conn| {
        let tenant = match tenants::create_tenant(conn, name, TenantStatus::Creating).await {
            Err(error) if error.is_unique_violation() => return Err(TenancyError::NameTaken),
            other => other?,
        };
        let job = NewJob {
            tenant_id: tenant.id,
            document_id: None,
            job_type: JobType::ProvisionTenant,
            payload: ProvisionTenantPayload { members },
            max_attempts: JobType::ProvisionTenant.max_attempts(max_attempts),
            request_id,
        };
        let job = jobs::enqueue_or_active(conn, &job)
            .await?
            .ok_or(TenancyError::JobActive)?;
        Ok((tenant, job))
    })
    .await
}

/// Checks a signed deletion or reset request against `server_secret` and the tenant row,
/// consumes its nonce, marks the tenant `deleting` and enqueues delete-tenant. Nothing
/// changes unless every check passes.
pub async fn request_deletion(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    request: DeleteTenantPayload,
    server_secret: &[u8],
    max_attempts: i32,
    request_id: Option<String>,
) -> Result<(Tenant, Job), TenancyError> {
    request.verify(server_secret, tenant_id, OffsetDateTime::now_utc())?;
    conn.transaction::<_, TenancyError, _>(async |conn| {
        let tenant = tenants::find_tenant(conn, tenant_id)
            .await?
            .ok_or(TenancyError::NotFound)?;
        if tenant.name != request.tenant_name {
            return Err(TenancyError::NameMismatch);
        }
        let tenant = tenants::transition(
            conn,
            tenant_id,
            &[
                TenantStatus::Active,
                TenantStatus::Suspended,
                TenantStatus::Deleting,
            ],
            TenantStatus::Deleting,
        )
        .await?
        .ok_or(TenancyError::WrongState(tenant.status))?;
        let nonce = request.nonce.clone();
        let job = NewJob {
            tenant_id,
            document_id: None,
            job_type: JobType::DeleteTenant,
            payload: request,
            max_attempts: JobType::DeleteTenant.max_attempts(max_attempts),
            request_id,
        };
        let enqueued = jobs::enqueue(conn, &job)
            .await?
            .ok_or(TenancyError::JobActive)?;
        if !nonces::consume(
            conn,
            &nonce,
            DELETION_NONCE_PURPOSE,
            tenant_id,
            enqueued.job_id,
        )
        .await?
        {
            return Err(TenancyError::NonceReplayed);
        }
        let job = jobs::find_job(conn, enqueued.job_id)
            .await?
            .ok_or(TenancyError::NotFound)?;
        Ok((tenant, job))
    })
    .await
}
