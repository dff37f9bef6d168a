//! An operator's controls over scheduling, for the admin routes, the `/ops` dashboard
//! and `quire-admin` alike: a tenant's limits (share weight, running cap, enqueue rate),
//! and pausing or resuming a queue or a tenant's processing. Each is one guarded
//! statement (a resume adds, in its transaction, the re-announcement of what the pause
//! held) and is logged once with the operator who made it.

use diesel_async::{AsyncConnection, AsyncPgConnection};
use uuid::Uuid;

use super::ActionError;
use crate::db::pauses::{self, QueuePause, Released};
use crate::db::tenants::{self, LimitsChange, Tenant};

/// Bounds of each limit (the columns' CHECK constraints say the same).
pub const SHARE_WEIGHT: (i32, i32) = (1, 1000);
pub const MAX_RUNNING_JOBS: (i32, i32) = (1, 100_000);
pub const ENQUEUE_RATE_PER_SECOND: (i32, i32) = (1, 100_000);
pub const ENQUEUE_BURST: (i32, i32) = (1, 100_000);

fn check(name: &str, value: Option<i32>, (low, high): (i32, i32)) -> Result<(), ActionError> {
    match value {
        Some(value) if !(low..=high).contains(&value) => Err(ActionError::Invalid {
            code: "invalid_limits",
            detail: format!("{name} is between {low} and {high}; {value} is not"),
        }),
        _ => Ok(()),
    }
}

/// Sets the limits `change` names (the others stay as they are; a nullable one named
/// as `None` goes back to the configuration's default). `invalid_limits` for a value
/// out of bounds or an empty change, `NotFound` for an unknown tenant.
pub async fn set_limits(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    change: LimitsChange,
    operator: &str,
) -> Result<Tenant, ActionError> {
    if change.is_empty() {
        return Err(ActionError::Invalid {
            code: "invalid_limits",
            detail: "name at least one of share_weight, max_running_jobs, \
                     enqueue_rate_per_second, enqueue_burst"
                .into(),
        });
    }
    check("share_weight", change.share_weight, SHARE_WEIGHT)?;
    check(
        "max_running_jobs",
        change.max_running_jobs.flatten(),
        MAX_RUNNING_JOBS,
    )?;
    check(
        "enqueue_rate_per_second",
        change.enqueue_rate_per_second.flatten(),
        ENQUEUE_RATE_PER_SECOND,
    )?;
    check(
        "enqueue_burst",
        change.enqueue_burst.flatten(),
        ENQUEUE_BURST,
    )?;
    let tenant = tenants::set_limits(conn, tenant_id, &change)
        .await?
        .ok_or(ActionError::NotFound)?;
    tracing::info!(
        %operator, %tenant_id,
        share_weight = tenant.share_weight,
        max_running_jobs = ?tenant.max_running_jobs,
        enqueue_rate_per_second = ?tenant.enqueue_rate_per_second,
        enqueue_burst = ?tenant.enqueue_burst,
        "tenant limits changed"
    );
    Ok(tenant)
}

/// A queue is a job type's list: an unknown name is `NotFound`.
fn known_queue(queue: &str) -> Result<(), ActionError> {
    crate::jobs::find(queue)
        .map(|_| ())
        .ok_or(ActionError::NotFound)
}

/// Pauses a queue: its queued jobs are held (not published, not claimed) until it is
/// resumed. Pausing a paused queue changes nothing and answers its pause.
pub async fn pause_queue(
    conn: &mut AsyncPgConnection,
    queue: &str,
    operator: &str,
) -> Result<QueuePause, ActionError> {
    known_queue(queue)?;
    if let Some(pause) = pauses::pause_queue(conn, queue, operator).await? {
        tracing::warn!(%operator, %queue, "queue paused");
        return Ok(pause);
    }
    pauses::paused_queues(conn)
        .await?
        .into_iter()
        .find(|pause| pause.queue == queue)
        // Resumed in between: say so rather than guess.
        .ok_or_else(|| ActionError::conflict("queue_not_paused", "the queue was resumed meanwhile"))
}

/// What a resume did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resumed {
    /// False when nothing was paused (a resume of a running queue changes nothing).
    pub was_paused: bool,
    /// Held jobs whose spent message was replaced by a new event.
    pub reannounced: usize,
}

/// Resumes a queue; its held jobs continue (see `pauses::reannounce_released`).
pub async fn resume_queue(
    conn: &mut AsyncPgConnection,
    queue: &str,
    operator: &str,
) -> Result<Resumed, ActionError> {
    known_queue(queue)?;
    let resumed = conn
        .transaction::<_, ActionError, _>(async |conn| {
            if !pauses::resume_queue(conn, queue).await? {
                return Ok(Resumed {
                    was_paused: false,
                    reannounced: 0,
                });
            }
            let reannounced = pauses::reannounce_released(conn, Released::Queue(queue)).await?;
            Ok(Resumed {
                was_paused: true,
                reannounced,
            })
        })
        .await?;
    if resumed.was_paused {
        tracing::warn!(%operator, %queue, reannounced = resumed.reannounced, "queue resumed");
    }
    Ok(resumed)
}

/// Pauses a tenant's processing: its queued jobs are held, running ones finish. Pausing
/// a paused tenant changes nothing.
pub async fn pause_tenant(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    operator: &str,
) -> Result<Tenant, ActionError> {
    let paused = pauses::pause_tenant(conn, tenant_id).await?;
    let tenant = tenants::find_tenant(conn, tenant_id)
        .await?
        .ok_or(ActionError::NotFound)?;
    if paused {
        tracing::warn!(%operator, %tenant_id, "tenant processing paused");
    }
    Ok(tenant)
}

/// Resumes a tenant's processing; its held jobs continue.
pub async fn resume_tenant(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    operator: &str,
) -> Result<(Tenant, Resumed), ActionError> {
    let (tenant, resumed) = conn
        .transaction::<_, ActionError, _>(async |conn| {
            let was_paused = pauses::resume_tenant(conn, tenant_id).await?;
            let reannounced = if was_paused {
                pauses::reannounce_released(conn, Released::Tenant(tenant_id)).await?
            } else {
                0
            };
            let tenant = tenants::find_tenant(conn, tenant_id)
                .await?
                .ok_or(ActionError::NotFound)?;
            Ok((
                tenant,
                Resumed {
                    was_paused,
                    reannounced,
                },
            ))
        })
        .await?;
    if resumed.was_paused {
        tracing::warn!(%operator, %tenant_id, reannounced = resumed.reannounced, "tenant processing resumed");
    }
    Ok((tenant, resumed))
}
