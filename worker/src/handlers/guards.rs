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

/// The job's payload as its type's shape; a payload that does not fit fails the job for
/// good (no retry can fix it).
pub fn payload<T: serde::de::DeserializeOwned>(
    job: &quire_shared::db::jobs::Job,
) -> Result<T, JobError> {
    serde_json::from_value(job.payload.clone())
        .map_err(|_| JobError::permanent("invalid_payload", "the job payload is not valid"))
}
