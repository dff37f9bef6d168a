//! Checks every handler makes before it touches tenant data.

use quire_shared::states::TenantStatus;

use crate::outcome::JobError;

/// The database failed under a handler: worth another attempt.
pub fn database_unavailable(error: impl Into<anyhow::Error>) -> JobError {
    JobError::transient("database_unavailable", "the database is unavailable", error)
}

/// Fails at once, with a safe code, unless the job's tenant is in the state the job type
/// requires (`ensure_active_tenant` of the catalogue). The executor calls it for every
/// job before its handler runs, with the tenant state its claim read in the same
/// statement (`None`: the tenant is gone).
pub fn ensure_tenant_status(
    actual: Option<TenantStatus>,
    required: TenantStatus,
) -> Result<(), JobError> {
    match actual {
        Some(actual) if actual == required => Ok(()),
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
