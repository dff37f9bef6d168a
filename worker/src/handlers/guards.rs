//! Checks every handler makes before it touches tenant data.

use diesel_async::AsyncPgConnection;
use quire_shared::db::{DbError, tenants};
use quire_shared::states::TenantStatus;

use crate::outcome::JobError;

/// The database failed under a handler: worth another attempt.
pub fn database_unavailable(error: impl Into<anyhow::Error>) -> JobError {
    JobError::transient("database_unavailable", "the database is unavailable", error)
}

/// Fails at once, with a safe code, unless the job's tenant is in the state the job type
/// requires (`ensure_active_tenant` of the catalogue). The executor calls it for every
/// job before its handler runs.
pub async fn ensure_tenant_status(
    conn: &mut AsyncPgConnection,
    tenant_id: uuid::Uuid,
    required: TenantStatus,
) -> Result<(), JobError> {
    let tenant = tenants::find_tenant(conn, tenant_id)
        .await
        .map_err(|error: DbError| database_unavailable(error))?;
    match tenant {
        Some(tenant) if tenant.status == required => Ok(()),
        _ if required == TenantStatus::Active => Err(JobError::permanent(
            "tenant_inactive",
            "the tenant is not active",
        )),
        _ => Err(JobError::permanent(
            "tenant_state",
            "the tenant is not in the state this job needs",
        )),
    }
}
