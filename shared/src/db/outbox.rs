//! Every SQL statement that moves an outbox event (DESIGN §4 step 2, §5). Several
//! dispatchers may run at once: claims use `FOR UPDATE SKIP LOCKED` and every later write
//! re-checks the claim it made. A statement that waited for an event a mark or a cancel
//! moved out of the live partition meanwhile runs again ([`super::moved`]).

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{Array, Int8, Text, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::DbError;
use super::jobs::{bounded, duration_millis};
use super::moved::again_if_moved;
use super::prepared::Prepared;
use super::schema::outbox_events;
use crate::states::EventStatus;

/// An event a dispatcher claimed for publication.
#[derive(Debug, Clone, QueryableByName)]
#[diesel(table_name = outbox_events, check_for_backend(diesel::pg::Pg))]
pub struct ClaimedEvent {
    pub id: Uuid,
    pub job_id: Uuid,
    pub queue: String,
    pub message: serde_json::Value,
    pub publish_attempts: i32,
    /// The database time of this claim: the push time its message carries. Never NULL
    /// on a row this claim returns (it sets it).
    #[diesel(sql_type = diesel::sql_types::Timestamptz)]
    pub claimed_at: time::OffsetDateTime,
}

/// A publication that Redis acknowledged.
#[derive(Debug, Clone, Copy)]
pub struct Published {
    pub event_id: Uuid,
    pub task_id: Uuid,
}

/// A publication that failed, with the delay before the event is due again.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    pub event_id: Uuid,
    pub delay: Duration,
}

/// `PENDING → PUBLISHING` for up to `limit` due events, oldest due first, skipping rows
/// another dispatcher holds.
pub async fn claim_due_events(
    conn: &mut AsyncPgConnection,
    dispatcher_id: &str,
    limit: i64,
) -> Result<Vec<ClaimedEvent>, DbError> {
    Ok(again_if_moved!({
        diesel::sql_query(
            "UPDATE outbox_events \
         SET status = 'PUBLISHING', claimed_at = now(), claimed_by = $1 \
         WHERE id IN ( \
             SELECT id FROM outbox_events \
             WHERE status = 'PENDING' AND next_attempt_at <= now() \
             ORDER BY next_attempt_at \
             LIMIT $2 \
             FOR UPDATE SKIP LOCKED) \
         AND status = 'PENDING' \
         RETURNING id, job_id, queue, message, publish_attempts, claimed_at",
        )
        .bind::<Text, _>(dispatcher_id)
        .bind::<Int8, _>(limit)
        .prepared()
        .load::<ClaimedEvent>(conn)
        .await
    })?)
}

/// `PUBLISHING → PUBLISHED` after Redis answered, for the events this dispatcher still
/// holds; in the same statement each job still `QUEUED` on that event records it as
/// announced (`announced_event_id`): the job is in flight until a worker claims it or it
/// gets a new event. A job row someone else holds is skipped, never waited for: this
/// statement holds the event rows, and a cancel holds the job before its events, so
/// waiting could deadlock. Whoever holds a queued job is claiming, cancelling or
/// deleting it, which ends its time in flight anyway; a skip that was not (the holder
/// rolled back) only leaves the job uncounted, one message over the bound, never a lost
/// one (lost-message recovery does not read the column). The events are locked in id
/// order first, as a cancel locks them (`jobs::cancel_events_cte`): in the order of the
/// batch, the two deadlocked. Returns how many it marked.
pub async fn mark_published(
    conn: &mut AsyncPgConnection,
    dispatcher_id: &str,
    published: &[Published],
) -> Result<usize, DbError> {
    let ids: Vec<Uuid> = published.iter().map(|p| p.event_id).collect();
    let task_ids: Vec<Uuid> = published.iter().map(|p| p.task_id).collect();
    let marked = again_if_moved!({
        diesel::sql_query(
            // `held` locks the batch's live events by key, in id order; `marked` checks
            // that each is still this dispatcher's claim. Both stay on the live partition
            // (`live_event!`). A filter of one status in `held` led the planner to
            // intersect the key lookup with the `PUBLISHING` partial index, whose dead
            // entries a bitmap scan visits again on every call (1 ms of a batch while a
            // backlog drains; see `scheduler::begin_round`). Every guard on a row found
            // by key is written `IS NOT DISTINCT FROM` (the `db` module's "Lookups by
            // key"). `relaxed` commits it asynchronously from any session, as the
            // dispatcher's sessions commit everything (docs/decisions.md, "Dispatcher"): a
            // crash that undoes it leaves the claim, which the claim timeout returns and a
            // round publishes again (a duplicate the worker's claim refuses). The express
            // path marks from the API's sessions, whose commits wait for the WAL.
            concat!(
                "WITH relaxed AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true)), \
         held AS ( \
             SELECT id FROM outbox_events WHERE id = ANY($1) AND ", live_event!(), " \
             ORDER BY id FOR UPDATE), \
         marked AS ( \
             UPDATE outbox_events AS e \
             SET status = 'PUBLISHED', published_at = now(), broker_task_id = p.task_id, \
                 last_error = NULL \
             FROM unnest($1::uuid[], $2::uuid[]) AS p(id, task_id) \
             WHERE e.id = p.id AND e.id IN (SELECT id FROM held) AND ", live_event!("e"), " \
               AND e.status IS NOT DISTINCT FROM 'PUBLISHING' AND e.claimed_by = $3 \
             RETURNING e.id, e.job_id), \
         locked AS ( \
             SELECT j.id FROM processing_jobs AS j JOIN marked AS m ON m.job_id = j.id \
             WHERE j.status IS NOT DISTINCT FROM 'QUEUED' AND j.current_event_id = m.id \
             FOR UPDATE OF j SKIP LOCKED), \
         announced AS ( \
             UPDATE processing_jobs AS j SET announced_event_id = m.id \
             FROM marked AS m \
             WHERE j.id = m.job_id AND j.id IN (SELECT id FROM locked) \
               AND j.status IS NOT DISTINCT FROM 'QUEUED' AND j.current_event_id = m.id \
             RETURNING j.id) \
         SELECT count(*) AS count FROM marked CROSS JOIN relaxed"
            ),
        )
        .bind::<Array<SqlUuid>, _>(&ids)
        .bind::<Array<SqlUuid>, _>(&task_ids)
        .bind::<Text, _>(dispatcher_id)
        .prepared()
        .get_result::<MarkedCount>(conn)
        .await
    })?;
    Ok(usize::try_from(marked.count).unwrap_or(0))
}

#[derive(QueryableByName)]
struct MarkedCount {
    #[diesel(sql_type = Int8)]
    count: i64,
}

/// `PUBLISHING → PENDING` after a failed push: one more publish attempt, due again after
/// each event's own backoff, with a safe error. Events are never dropped. Locks them in
/// id order first, like every statement that writes several events.
pub async fn release_for_retry(
    conn: &mut AsyncPgConnection,
    dispatcher_id: &str,
    retries: &[Retry],
    safe_error: &str,
) -> Result<usize, DbError> {
    let ids: Vec<Uuid> = retries.iter().map(|r| r.event_id).collect();
    let delays: Vec<i64> = retries.iter().map(|r| duration_millis(r.delay)).collect();
    Ok(again_if_moved!({
        diesel::sql_query(
            "WITH held AS ( \
             SELECT id FROM outbox_events \
             WHERE id = ANY($1) AND status = 'PUBLISHING' AND claimed_by = $3 \
             ORDER BY id FOR UPDATE) \
         UPDATE outbox_events AS e \
         SET status = 'PENDING', publish_attempts = e.publish_attempts + 1, \
             next_attempt_at = now() + r.delay_ms * interval '1 millisecond', \
             claimed_at = NULL, claimed_by = NULL, last_error = $4 \
         FROM unnest($1::uuid[], $2::int8[]) AS r(id, delay_ms) \
         WHERE e.id = r.id AND e.id IN (SELECT id FROM held) \
           AND e.status = 'PUBLISHING' AND e.claimed_by = $3",
        )
        .bind::<Array<SqlUuid>, _>(&ids)
        .bind::<Array<Int8>, _>(&delays)
        .bind::<Text, _>(dispatcher_id)
        .bind::<Text, _>(bounded(safe_error))
        .prepared()
        .execute(conn)
        .await
    })?)
}

/// `PUBLISHING → PENDING` for claims older than `claim_timeout`: their dispatcher died or
/// hung mid-batch. Publishing such an event twice is harmless (the claim dedupes). In id
/// order, like every statement that writes several events.
pub async fn recover_expired_claims(
    conn: &mut AsyncPgConnection,
    claim_timeout: Duration,
) -> Result<usize, DbError> {
    Ok(again_if_moved!({
        diesel::sql_query(
            "WITH held AS ( \
             SELECT id FROM outbox_events \
             WHERE status = 'PUBLISHING' AND claimed_at < now() - $1 * interval '1 millisecond' \
             ORDER BY id FOR UPDATE) \
         UPDATE outbox_events \
         SET status = 'PENDING', claimed_at = NULL, claimed_by = NULL \
         WHERE id IN (SELECT id FROM held) AND status = 'PUBLISHING' \
           AND claimed_at < now() - $1 * interval '1 millisecond'",
        )
        .bind::<Int8, _>(duration_millis(claim_timeout))
        .execute(conn)
        .await
    })?)
}

/// One event row as operators see it.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = outbox_events, check_for_backend(diesel::pg::Pg))]
pub struct OutboxEvent {
    pub id: Uuid,
    pub job_id: Uuid,
    pub status: EventStatus,
    pub publish_attempts: i32,
    pub broker_task_id: Option<Uuid>,
    pub last_error: Option<String>,
}

/// The events of one job, oldest first.
pub async fn job_events(
    conn: &mut AsyncPgConnection,
    job_id: Uuid,
) -> Result<Vec<OutboxEvent>, DbError> {
    Ok(outbox_events::table
        .filter(outbox_events::job_id.eq(job_id))
        .order(outbox_events::created_at.asc())
        .select(OutboxEvent::as_select())
        .load(conn)
        .await?)
}

/// The stored message of one event (tests and operators).
pub async fn event_message(
    conn: &mut AsyncPgConnection,
    event_id: Uuid,
) -> Result<serde_json::Value, DbError> {
    Ok(outbox_events::table
        .find(event_id)
        .select(outbox_events::message)
        .first(conn)
        .await?)
}
