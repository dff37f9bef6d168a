//! Recovery and retention (DESIGN §5): the rescuer, lost-message recovery and pruning
//! of finished work (each run by its own dispatcher maintenance service).
//! Every statement re-checks, in its own WHERE, what the caller saw when it chose the
//! rows, so it is safe with any number of dispatchers and with workers finishing at the
//! same moment.

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{Array, Int4, Int8, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use futures_util::future::BoxFuture;
use time::OffsetDateTime;
use uuid::Uuid;

use super::DbError;
use super::jobs::duration_millis;
use super::jobs::{next_event_cte, requeued_due};

/// Advisory lock keys of the maintenance tasks that must run in one dispatcher per
/// interval.
pub mod locks {
    pub const RESCUER: i64 = 0x5155_4952_0001;
    pub const LOST_MESSAGES: i64 = 0x5155_4952_0002;
    pub const RETENTION: i64 = 0x5155_4952_0003;
    pub const QUEUE_STATE: i64 = 0x5155_4952_0004;
    pub const STORAGE_GC: i64 = 0x5155_4952_0005;
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = Int8)]
    count: i64,
}

#[derive(QueryableByName)]
struct Locked {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    locked: bool,
}

/// Runs `task` in a transaction holding the advisory lock `key`, or skips it (`None`)
/// when another process holds the lock for this tick.
pub async fn once_per_tick<T, F>(
    conn: &mut AsyncPgConnection,
    key: i64,
    task: F,
) -> Result<Option<T>, DbError>
where
    T: Send,
    F: for<'r> FnOnce(&'r mut AsyncPgConnection) -> BoxFuture<'r, Result<T, DbError>> + Send,
{
    conn.transaction::<_, DbError, _>(async |conn| {
        let locked = diesel::sql_query("SELECT pg_try_advisory_xact_lock($1) AS locked")
            .bind::<Int8, _>(key)
            .get_result::<Locked>(conn)
            .await?
            .locked;
        if !locked {
            return Ok(None);
        }
        Ok(Some(task(conn).await?))
    })
    .await
}

#[derive(QueryableByName)]
struct Expired {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
    #[diesel(sql_type = Int4)]
    attempts: i32,
    #[diesel(sql_type = Int4)]
    max_attempts: i32,
}

/// A job the rescuer failed for good.
#[derive(QueryableByName)]
struct LostJob {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    tenant_id: Uuid,
    #[diesel(sql_type = diesel::sql_types::Nullable<SqlUuid>)]
    document_id: Option<Uuid>,
    #[diesel(sql_type = diesel::sql_types::Text)]
    job_type: String,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    document_failed: bool,
}

/// What one rescue pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Rescued {
    pub requeued: usize,
    pub failed: usize,
}

/// `RUNNING` jobs whose lease expired: back to `QUEUED` with a new event due now, or
/// `FAILED` (`worker_lost`) when their attempts are spent — a poison pill that kills its
/// worker every time ends here instead of looping. Each UPDATE re-checks status,
/// attempt and lease, so a job that finished meanwhile keeps its result. A job whose
/// outcome is its document's status fails its document too.
pub async fn rescue_expired_leases(
    conn: &mut AsyncPgConnection,
    limit: i64,
) -> Result<Rescued, DbError> {
    let expired: Vec<Expired> = diesel::sql_query(
        "SELECT id, attempts, max_attempts FROM processing_jobs \
         WHERE status = 'RUNNING' AND lease_expires_at < now() \
         ORDER BY lease_expires_at LIMIT $1",
    )
    .bind::<Int8, _>(limit)
    .load(conn)
    .await?;
    let (retry, spent): (Vec<&Expired>, Vec<&Expired>) = expired
        .iter()
        .partition(|job| job.attempts < job.max_attempts);

    let requeued = if retry.is_empty() {
        0
    } else {
        let ids: Vec<Uuid> = retry.iter().map(|job| job.id).collect();
        let attempts: Vec<i32> = retry.iter().map(|job| job.attempts).collect();
        let events: Vec<Uuid> = retry.iter().map(|_| Uuid::now_v7()).collect();
        diesel::sql_query(concat!(
            "WITH seen AS (SELECT * FROM unnest($1::uuid[], $2::int4[], $3::uuid[]) AS s(id, attempts, event_id)), \
             job AS ( \
                 UPDATE processing_jobs AS j \
                 SET status = 'QUEUED', current_event_id = seen.event_id, worker_id = NULL, \
                     lease_expires_at = NULL, heartbeat_at = NULL, error_code = 'worker_lost', \
                     error_message = 'the worker running this job stopped responding', updated_at = now() \
                 FROM seen, processing_jobs AS prev \
                 WHERE j.id = seen.id AND prev.id = seen.id \
                   AND j.status IS NOT DISTINCT FROM 'RUNNING' AND j.attempts = seen.attempts \
                   AND j.lease_expires_at < now() AND j.attempts < j.max_attempts \
                 RETURNING j.id, j.tenant_id, j.job_type, seen.event_id, prev.current_event_id AS previous), ",
            next_event_cte!("job.event_id", "job.previous", requeued_due!("job.previous")),
            " SELECT count(pg_notify('quire_outbox', '')) AS count FROM event"
        ))
        .bind::<Array<SqlUuid>, _>(ids)
        .bind::<Array<Int4>, _>(attempts)
        .bind::<Array<SqlUuid>, _>(events)
        .get_result::<Count>(conn)
        .await?
        .count
    };

    let failed = if spent.is_empty() {
        0
    } else {
        let ids: Vec<Uuid> = spent.iter().map(|job| job.id).collect();
        let attempts: Vec<i32> = spent.iter().map(|job| job.attempts).collect();
        // One transaction: the failures and their announcements commit together.
        conn.transaction::<_, DbError, _>(async |conn| {
            // The version a failed analysis names fails, and its document only while
            // that version is current (`failed_analysis_ctes!`); `document_failed` says
            // which documents moved, for their announcement.
            let failed: Vec<LostJob> = diesel::sql_query(concat!(
                "WITH seen AS (SELECT * FROM unnest($1::uuid[], $2::int4[]) AS s(id, attempts)), \
                 job AS ( \
                     UPDATE processing_jobs AS j \
                     SET status = 'FAILED', finished_at = now(), lease_expires_at = NULL, \
                         error_code = 'worker_lost', \
                         error_message = 'the job stopped its worker on every attempt', updated_at = now() \
                     FROM seen \
                     WHERE j.id = seen.id AND j.status IS NOT DISTINCT FROM 'RUNNING' AND j.attempts = seen.attempts \
                       AND j.lease_expires_at < now() AND j.attempts >= j.max_attempts \
                     RETURNING j.id, j.tenant_id, j.document_id, j.job_type, j.payload), ",
                super::analysis::failed_analysis_ctes!(
                    "job",
                    "'processing this document kept failing'",
                    "job.job_type = ANY($3)"
                ),
                " SELECT job.id, job.tenant_id, job.document_id, job.job_type, \
                     EXISTS (SELECT 1 FROM document WHERE document.id = job.document_id) AS document_failed \
                 FROM job"
            ))
            .bind::<Array<SqlUuid>, _>(ids)
            .bind::<Array<Int4>, _>(attempts)
            .bind::<Array<diesel::sql_types::Text>, _>(crate::jobs::document_status_owners())
            .load(conn)
            .await?;
            for job in &failed {
                const CODE: &str = "worker_lost";
                crate::events::job_failed(
                    conn,
                    job.tenant_id,
                    job.id,
                    &job.job_type,
                    job.document_id,
                    CODE,
                )
                .await?;
                if let (true, Some(document_id)) = (job.document_failed, job.document_id) {
                    crate::events::document_failed(conn, job.tenant_id, document_id, job.id, CODE)
                        .await?;
                }
            }
            Ok(i64::try_from(failed.len()).unwrap_or(i64::MAX))
        })
        .await?
    };
    Ok(Rescued {
        requeued: usize::try_from(requeued).unwrap_or(0),
        failed: usize::try_from(failed).unwrap_or(0),
    })
}

#[derive(QueryableByName)]
struct Unclaimed {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    current_event_id: Uuid,
}

/// Which `QUEUED` jobs a lost-message pass looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostScope {
    /// The jobs whose current event the mark published recorded as announced
    /// (`processing_jobs_in_flight_idx`): at most the scheduler's bound per queue,
    /// however long the backlog behind them.
    Announced,
    /// Every queued job of the type: also a job whose event was published while its row
    /// was locked (the mark skips a locked job rather than wait, `outbox::mark_published`),
    /// so that it was never recorded as announced. Reads the whole backlog of the type.
    Everything,
}

/// The lost-message candidates of [`reannounce_lost`], with `$scope`'s condition.
macro_rules! unclaimed_query {
    ($scope:literal) => {
        concat!(
            "SELECT j.id, j.current_event_id \
             FROM processing_jobs j JOIN outbox_events e ON e.id = j.current_event_id \
             WHERE j.status = 'QUEUED' AND j.job_type = $1 ",
            $scope,
            " AND e.status = 'PUBLISHED' \
               AND e.published_at < now() - $2 * interval '1 millisecond' \
               AND e.published_at < COALESCE($3, 'infinity'::timestamptz) \
               AND NOT EXISTS (SELECT 1 FROM queue_pauses AS p WHERE p.queue = j.job_type) \
               AND NOT EXISTS (SELECT 1 FROM tenants AS t \
                               WHERE t.id = j.tenant_id AND t.processing_paused_at IS NOT NULL) \
             ORDER BY e.published_at LIMIT $4"
        )
    };
}

/// Lost-message recovery by the FIFO rule: a `QUEUED` job of `job_type` whose current
/// event was `PUBLISHED` before the oldest message still in its list was pushed
/// (`oldest_pushed_at`, the database time that message carries; `None` for an empty
/// list) — and before `now() - grace` — was popped and never claimed, or Redis lost it.
/// The caller skips a list whose oldest message it cannot read: that is "cannot tell",
/// never "empty". A job a pause holds is skipped: its message was refused on purpose,
/// and the resume announces it again (`pauses::reannounce_released`). It gets a new event due now; the old message, if it ever
/// turns up, claims nothing. `scope` says which queued jobs are looked at. Returns how
/// many jobs were re-announced.
pub async fn reannounce_lost(
    conn: &mut AsyncPgConnection,
    job_type: &str,
    oldest_pushed_at: Option<OffsetDateTime>,
    grace: Duration,
    limit: i64,
    scope: LostScope,
) -> Result<usize, DbError> {
    let query = match scope {
        LostScope::Announced => unclaimed_query!("AND j.announced_event_id = j.current_event_id"),
        LostScope::Everything => unclaimed_query!(""),
    };
    let unclaimed: Vec<Unclaimed> = diesel::sql_query(query)
        .bind::<Text, _>(job_type)
        .bind::<Int8, _>(duration_millis(grace))
        .bind::<Nullable<Timestamptz>, _>(oldest_pushed_at)
        .bind::<Int8, _>(limit)
        .load(conn)
        .await?;
    if unclaimed.is_empty() {
        return Ok(0);
    }
    let jobs: Vec<(Uuid, Uuid)> = unclaimed
        .iter()
        .map(|job| (job.id, job.current_event_id))
        .collect();
    announce_again(conn, &jobs).await
}

/// Gives each `(job, current event)` a new event due now, if the job is still `QUEUED`
/// with that current event (the fence), and wakes the dispatchers at commit. The old
/// message, if one is still in a list, claims nothing. Lost-message recovery and a
/// pause's resume (`pauses::reannounce_released`) both announce through here. Returns
/// how many jobs were announced again.
pub(crate) async fn announce_again(
    conn: &mut AsyncPgConnection,
    jobs: &[(Uuid, Uuid)],
) -> Result<usize, DbError> {
    let ids: Vec<Uuid> = jobs.iter().map(|(id, _)| *id).collect();
    let old_events: Vec<Uuid> = jobs.iter().map(|(_, event)| *event).collect();
    let new_events: Vec<Uuid> = jobs.iter().map(|_| Uuid::now_v7()).collect();
    let count = diesel::sql_query(concat!(
        "WITH seen AS (SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[]) AS s(id, old_event, new_event)), \
         job AS ( \
             UPDATE processing_jobs AS j \
             SET current_event_id = seen.new_event, updated_at = now() \
             FROM seen \
             WHERE j.id = seen.id AND j.status = 'QUEUED' AND j.current_event_id = seen.old_event \
             RETURNING j.id, j.tenant_id, j.job_type, seen.new_event, seen.old_event), ",
        next_event_cte!("job.new_event", "job.old_event", requeued_due!("job.old_event")),
        " SELECT count(pg_notify('quire_outbox', '')) AS count FROM event"
    ))
    .bind::<Array<SqlUuid>, _>(ids)
    .bind::<Array<SqlUuid>, _>(old_events)
    .bind::<Array<SqlUuid>, _>(new_events)
    .get_result::<Count>(conn)
    .await?
    .count;
    Ok(usize::try_from(count).unwrap_or(0))
}

/// How long finished work is kept.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    pub events: Duration,
    pub finished_jobs: Duration,
    pub failed_jobs: Duration,
    /// The tenant event log (`[events] retention_hours`).
    pub tenant_events: Duration,
    pub batch: i64,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    pub events: usize,
    pub jobs: usize,
    /// Expired dashboard sessions (they open nothing already; this only frees rows).
    pub sessions: usize,
    /// Expired idempotency keys (their next use takes them over anyway).
    pub idempotency_keys: usize,
    /// Tenant events past the event retention (`db::event_stream::prune`).
    pub tenant_events: usize,
}

/// Deletes old delivered or cancelled events that no active job still depends on, then
/// old finished jobs with their events (`FAILED` ones are kept longer), then expired
/// dashboard sessions and idempotency keys, then old tenant events. Batched.
///
/// Each batch walks its index from the oldest row (`outbox_events_delivered_idx`,
/// `processing_jobs_finished_idx`) and stops at the cutoff, so a pass reads what it
/// deletes and not the history it keeps: without the `ORDER BY`, the planner read every
/// retained row on every pass (a scan of the jobs table, of the events' job index) when
/// nothing was old enough (the scale bench, docs/benchmarks.md, "Cost at scale"). The
/// one row a pass may read again and again is a failed job between the two ages, kept
/// for its longer retention.
pub async fn prune(conn: &mut AsyncPgConnection, retention: &Retention) -> Result<Pruned, DbError> {
    let events = diesel::sql_query(
        "WITH doomed AS ( \
             SELECT e.id FROM outbox_events e JOIN processing_jobs j ON j.id = e.job_id \
             WHERE e.status IN ('PUBLISHED', 'CANCELLED') \
               AND e.created_at < now() - $1 * interval '1 millisecond' \
               AND (j.current_event_id IS DISTINCT FROM e.id \
                    OR j.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED')) \
             ORDER BY e.created_at LIMIT $2), \
         gone AS (DELETE FROM outbox_events WHERE id IN (SELECT id FROM doomed) RETURNING id) \
         SELECT count(*) AS count FROM gone",
    )
    .bind::<Int8, _>(duration_millis(retention.events))
    .bind::<Int8, _>(retention.batch)
    .get_result::<Count>(conn)
    .await?
    .count;
    let jobs = diesel::sql_query(
        "WITH doomed AS ( \
             SELECT id FROM processing_jobs \
             WHERE status IN ('SUCCEEDED', 'FAILED', 'CANCELLED') \
               AND finished_at < now() - LEAST($1, $2) * interval '1 millisecond' \
               AND (status = 'FAILED' OR finished_at < now() - $1 * interval '1 millisecond') \
               AND (status <> 'FAILED' OR finished_at < now() - $2 * interval '1 millisecond') \
             ORDER BY finished_at LIMIT $3 FOR UPDATE SKIP LOCKED), \
         gone_events AS (DELETE FROM outbox_events WHERE job_id IN (SELECT id FROM doomed)), \
         gone AS (DELETE FROM processing_jobs WHERE id IN (SELECT id FROM doomed) RETURNING id) \
         SELECT count(*) AS count FROM gone",
    )
    .bind::<Int8, _>(duration_millis(retention.finished_jobs))
    .bind::<Int8, _>(duration_millis(retention.failed_jobs))
    .bind::<Int8, _>(retention.batch)
    .get_result::<Count>(conn)
    .await?
    .count;
    let sessions = super::ops_sessions::prune_expired(conn, retention.batch).await?;
    let idempotency_keys = super::idempotency::prune_expired(conn, retention.batch).await?;
    let tenant_events =
        super::event_stream::prune(conn, retention.tenant_events, retention.batch).await?;
    Ok(Pruned {
        events: usize::try_from(events).unwrap_or(0),
        jobs: usize::try_from(jobs).unwrap_or(0),
        sessions,
        idempotency_keys,
        tenant_events,
    })
}
