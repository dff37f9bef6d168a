//! The two actions on a job: retry a `FAILED` one, cancel an active one. The API's retry
//! route, the dashboard's buttons and `quire-admin jobs retry|cancel` all call these,
//! so the rules below (docs/decisions.md, "Retry and cancel") hold for every caller.

use diesel_async::{AsyncConnection, AsyncPgConnection};
use uuid::Uuid;

use super::{ActionError, hold_tenant};
use crate::db::documents;
use crate::db::jobs::{self, Job};
use crate::db::tenants::{TenantLock, TenantWrite};
use crate::jobs::{JobSpec, document_status_owners, find};

/// The safe message of a job an operator cancelled (dashboard and CLI alike).
pub const CANCELLED_BY_OPERATOR: &str = "cancelled by an operator";

/// Which jobs the caller may act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobScope {
    /// A member: only the jobs of this document of this tenant (anything else is
    /// `NotFound`, exactly like a missing job).
    Document {
        tenant_id: Uuid,
        /// The tenant's generation when the member was let in (see `TenantWrite`).
        generation: i64,
        document_id: Uuid,
    },
    /// An operator: any job.
    Any,
}

impl JobScope {
    /// The tenant a change of `job` writes to, as this caller may write it.
    fn tenant_write(self, job: &Job) -> TenantWrite {
        TenantWrite {
            tenant_id: job.tenant_id,
            generation: match self {
                Self::Document { generation, .. } => Some(generation),
                Self::Any => None,
            },
        }
    }
}

/// Holds the job's tenant in the state its type runs in (its tenant guard: `active` for
/// a document's jobs, `deleting` for a deletion), so a retry or cancel never lands
/// across a change of the tenant's state; a type without a guard needs none.
async fn hold_job_tenant(
    conn: &mut AsyncPgConnection,
    scope: JobScope,
    job: &Job,
) -> Result<(), ActionError> {
    let guard = find(&job.job_type).and_then(|job_type| job_type.spec().required_tenant_status);
    match guard {
        Some(required) => {
            hold_tenant(conn, &scope.tenant_write(job), required, TenantLock::Share).await
        }
        None => Ok(()),
    }
}

/// The job, if the scope lets the caller see it.
async fn find_in_scope(
    conn: &mut AsyncPgConnection,
    scope: JobScope,
    job_id: Uuid,
) -> Result<Job, ActionError> {
    let job = match scope {
        JobScope::Document {
            tenant_id,
            document_id,
            ..
        } => {
            // A trashed (or missing) document hides its jobs from its members.
            documents::find_document(conn, tenant_id, document_id)
                .await?
                .ok_or(ActionError::NotFound)?;
            jobs::find_document_job(conn, tenant_id, document_id, job_id).await?
        }
        JobScope::Any => jobs::find_job(conn, job_id).await?,
    };
    job.ok_or(ActionError::NotFound)
}

fn owns_document_status(job: &Job) -> bool {
    find(&job.job_type).is_some_and(|job_type| job_type.spec().owns_document_status)
}

/// `FAILED → QUEUED` with a new outbox event due now. The rule, for every caller:
/// - only a `FAILED` job (`job_not_failed`, with its current status, otherwise);
/// - it gets its type's attempt budget again (`max_attempts = attempts + budget`, the
///   budget being `jobs.max_attempts`, or 3 for short-lived types);
/// - a job whose outcome is its document's status puts its `FAILED` version back to
///   `PENDING` in the same transaction, and the `FAILED` document while that version is
///   its current one;
/// - when an equivalent job is active already (the partial unique indexes), nothing
///   changes and the answer is `job_already_active`.
pub async fn retry(
    conn: &mut AsyncPgConnection,
    scope: JobScope,
    job_id: Uuid,
    configured_attempts: i32,
) -> Result<Job, ActionError> {
    let job = find_in_scope(conn, scope, job_id).await?;
    let budget = find(&job.job_type)
        .map(|job_type| job_type.spec())
        .map_or(configured_attempts, |spec: JobSpec| {
            spec.max_attempts(configured_attempts)
        });
    let retried = conn
        .transaction::<_, ActionError, _>(async |conn| {
            hold_job_tenant(conn, scope, &job).await?;
            if !jobs::retry_failed_job(conn, job.tenant_id, job.document_id, job.id, budget).await?
            {
                return Ok(false);
            }
            if owns_document_status(&job) && job.document_id.is_some() {
                documents::mark_pending_for_job(conn, job.id).await?;
            }
            Ok(true)
        })
        .await;
    match retried {
        Ok(true) => {}
        Ok(false) => {
            let now = jobs::find_job(conn, job.id)
                .await?
                .ok_or(ActionError::NotFound)?;
            return Err(ActionError::wrong_status(
                "job_not_failed",
                format!(
                    "only a FAILED job can be retried; this one is {}",
                    now.status
                ),
                now.status.as_str(),
            ));
        }
        Err(ActionError::Db(error)) if error.is_unique_violation() => {
            return Err(ActionError::conflict(
                "job_already_active",
                "another job for this document version is queued or running",
            ));
        }
        Err(error) => return Err(error),
    }
    tracing::info!(job_id = %job.id, tenant_id = %job.tenant_id, "failed job queued again");
    jobs::find_job(conn, job.id)
        .await?
        .ok_or(ActionError::NotFound)
}

/// `QUEUED | RUNNING → CANCELLED`, its undelivered events too; a running handler stops at
/// its next heartbeat. A live document whose analysis this was, and that has no other
/// analysis queued or running, settles at once (`READY` when it was analyzed before,
/// `FAILED` otherwise): it never stays `PENDING` or `PROCESSING` for ever. Anything but
/// an active job answers `job_not_active` with its current status.
pub async fn cancel(
    conn: &mut AsyncPgConnection,
    scope: JobScope,
    job_id: Uuid,
    safe_message: &str,
) -> Result<Job, ActionError> {
    let job = find_in_scope(conn, scope, job_id).await?;
    let owners = document_status_owners();
    let cancelled = conn
        .transaction::<_, ActionError, _>(async |conn| {
            hold_job_tenant(conn, scope, &job).await?;
            if jobs::cancel_jobs(conn, &[job.id], safe_message).await? == 0 {
                return Ok(false);
            }
            if let (true, Some(document_id)) = (owns_document_status(&job), job.document_id) {
                // The document before its versions (settle writes both): the lock order.
                documents::lock_document(conn, job.tenant_id, document_id).await?;
                documents::settle_after_cancel(conn, job.tenant_id, document_id, &owners).await?;
            }
            Ok(true)
        })
        .await?;
    let now = jobs::find_job(conn, job.id)
        .await?
        .ok_or(ActionError::NotFound)?;
    if !cancelled {
        return Err(ActionError::wrong_status(
            "job_not_active",
            format!(
                "only a QUEUED or RUNNING job can be cancelled; this one is {}",
                now.status
            ),
            now.status.as_str(),
        ));
    }
    tracing::info!(job_id = %job.id, tenant_id = %job.tenant_id, "job cancelled");
    Ok(now)
}
