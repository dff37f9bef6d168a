//! The tenant lifecycle, for the admin routes and `quire-admin` alike: create a tenant
//! (with its provision-tenant job), suspend and activate it, and accept a signed deletion
//! or reset request (tenant `deleting` plus its delete-tenant job). Each is one
//! transaction (or one guarded statement).

use diesel_async::{AsyncConnection, AsyncPgConnection};
use time::OffsetDateTime;
use uuid::Uuid;

use super::ActionError;
use crate::db::jobs::{self, Job, NewJob};
use crate::db::nonces;
use crate::db::tenants::{self, Tenant};
use crate::jobs::{DeleteTenant, ProvisionTenant};
use crate::permissions::MemberSpec;
use crate::states::TenantStatus;

/// What the nonce of a tenant deletion is recorded as.
pub const DELETION_NONCE_PURPOSE: &str = "tenant-deletion";

/// Longest tenant name, in characters.
pub const MAX_NAME_CHARS: usize = 100;

/// Inserts the tenant (`creating`) and its provision-tenant job. The name is trimmed
/// and has 1 to [`MAX_NAME_CHARS`] characters.
pub async fn create_tenant(
    conn: &mut AsyncPgConnection,
    name: &str,
    members: Vec<MemberSpec>,
    max_attempts: i32,
    request_id: Option<String>,
) -> Result<(Tenant, Job), ActionError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(ActionError::Invalid {
            code: "invalid_name",
            detail: format!("a tenant name has 1 to {MAX_NAME_CHARS} characters"),
        });
    }
    conn.transaction::<_, ActionError, _>(async |conn| {
        let tenant = match tenants::create_tenant(conn, name, TenantStatus::Creating).await {
            Err(error) if error.is_unique_violation() => return Err(ActionError::TenantNameTaken),
            other => other?,
        };
        let job = NewJob::new(
            tenant.id,
            ProvisionTenant { members },
            max_attempts,
            request_id,
        );
        let job = jobs::enqueue_or_active(conn, &job)
            .await?
            .ok_or(ActionError::TenantJobActive)?;
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
    request: DeleteTenant,
    server_secret: &[u8],
    max_attempts: i32,
    request_id: Option<String>,
) -> Result<(Tenant, Job), ActionError> {
    request.verify(server_secret, tenant_id, OffsetDateTime::now_utc())?;
    conn.transaction::<_, ActionError, _>(async |conn| {
        let tenant = tenants::find_tenant(conn, tenant_id)
            .await?
            .ok_or(ActionError::NotFound)?;
        if tenant.name != request.tenant_name {
            return Err(ActionError::TenantNameMismatch);
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
        .ok_or(ActionError::TenantState(tenant.status))?;
        let nonce = request.nonce.clone();
        let job = NewJob::new(tenant_id, request, max_attempts, request_id);
        let enqueued = jobs::enqueue(conn, &job)
            .await?
            .ok_or(ActionError::TenantJobActive)?;
        if !nonces::consume(
            conn,
            &nonce,
            DELETION_NONCE_PURPOSE,
            tenant_id,
            enqueued.job_id,
        )
        .await?
        {
            return Err(ActionError::NonceReplayed);
        }
        let job = jobs::find_job(conn, enqueued.job_id)
            .await?
            .ok_or(ActionError::NotFound)?;
        Ok((tenant, job))
    })
    .await
}

/// `active → suspended`: reads keep working, writes are refused, queued jobs fail.
pub async fn suspend(conn: &mut AsyncPgConnection, tenant_id: Uuid) -> Result<Tenant, ActionError> {
    move_tenant(
        conn,
        tenant_id,
        TenantStatus::Active,
        TenantStatus::Suspended,
    )
    .await
}

/// `suspended → active`.
pub async fn activate(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
) -> Result<Tenant, ActionError> {
    move_tenant(
        conn,
        tenant_id,
        TenantStatus::Suspended,
        TenantStatus::Active,
    )
    .await
}

/// One guarded transition; `TenantState` names the state the tenant is in otherwise.
async fn move_tenant(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    from: TenantStatus,
    to: TenantStatus,
) -> Result<Tenant, ActionError> {
    if let Some(tenant) = tenants::transition(conn, tenant_id, &[from], to).await? {
        tracing::info!(%tenant_id, status = %to, "tenant status changed");
        return Ok(tenant);
    }
    let tenant = tenants::find_tenant(conn, tenant_id)
        .await?
        .ok_or(ActionError::NotFound)?;
    Err(ActionError::TenantState(tenant.status))
}
