//! Periodic jobs (issue 16): every statement of the `schedules` table, and what the
//! schedules read to decide their work. A slot is claimed in ONE guarded statement that
//! moves `next_run_at` past `now()`, so across any number of dispatchers each slot runs
//! once; the next slot is the first one after now in the schedule's phase, so a fleet
//! that was down runs once when it is back, never once per missed slot. A run's later
//! writes are fenced by the `runs` count its claim returned.

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{Array, Bool, Int4, Int8, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use time::OffsetDateTime;
use uuid::Uuid;

use super::DbError;
use super::schema::schedules;

/// A slot this process claimed: the schedule's name, the claim's fence and its times.
#[derive(Debug, Clone, PartialEq, Eq, QueryableByName)]
pub struct Slot {
    #[diesel(sql_type = Text)]
    pub name: String,
    /// The schedule's claimed slots so far, this one included: the run's fence.
    #[diesel(sql_type = Int8)]
    pub runs: i64,
    #[diesel(sql_type = Timestamptz)]
    pub last_run_at: OffsetDateTime,
    /// When the next slot is due (after now).
    #[diesel(sql_type = Timestamptz)]
    pub next_run_at: OffsetDateTime,
}

fn millis(every: Duration) -> i64 {
    i64::try_from(every.as_millis()).unwrap_or(i64::MAX).max(1)
}

/// Claims the schedule's due slot, or answers `None` (not due, or another dispatcher
/// claimed it first). The first claim of a schedule creates its row and runs at once.
/// One statement: a racing claim waits for this one's commit and then finds the slot
/// taken. The next slot is `next_run_at` plus as many whole intervals as put it past
/// `now()`: a slot missed for ten intervals runs once, and the phase is kept.
pub async fn claim(
    conn: &mut AsyncPgConnection,
    name: &str,
    every: Duration,
) -> Result<Option<Slot>, DbError> {
    Ok(diesel::sql_query(
        "INSERT INTO schedules AS s (name, interval_ms, next_run_at, last_run_at, runs, last_outcome) \
         VALUES ($1, $2, now() + make_interval(secs => $2::float8 / 1000), now(), 1, 'running') \
         ON CONFLICT (name) DO UPDATE SET \
             interval_ms = EXCLUDED.interval_ms, \
             next_run_at = s.next_run_at + make_interval(secs => ( \
                 (floor(extract(epoch FROM now() - s.next_run_at) * 1000 / EXCLUDED.interval_ms) + 1) \
                 * EXCLUDED.interval_ms)::float8 / 1000), \
             last_run_at = now(), last_finished_at = NULL, runs = s.runs + 1, \
             last_outcome = 'running', last_detail = NULL \
         WHERE s.next_run_at <= now() \
         RETURNING name, runs, last_run_at, next_run_at",
    )
    .bind::<Text, _>(name)
    .bind::<Int8, _>(millis(every))
    .get_result::<Slot>(conn)
    .await
    .optional()?)
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    Failed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
        }
    }
}

/// Records how the run of `slot` ended, unless a later slot was claimed meanwhile
/// (then the later run's record stands): `false`.
pub async fn finish(
    conn: &mut AsyncPgConnection,
    slot: &Slot,
    outcome: Outcome,
    detail: &str,
) -> Result<bool, DbError> {
    let detail: String = detail.chars().take(500).collect();
    let changed = diesel::sql_query(
        "UPDATE schedules SET last_outcome = $3, last_detail = $4, last_finished_at = now() \
         WHERE name = $1 AND runs = $2 AND last_outcome = 'running'",
    )
    .bind::<Text, _>(&slot.name)
    .bind::<Int8, _>(slot.runs)
    .bind::<Text, _>(outcome.as_str())
    .bind::<Text, _>(detail)
    .execute(conn)
    .await?;
    Ok(changed == 1)
}

/// A schedule's row as the catalogue and the dashboard show it.
#[derive(Debug, Clone, PartialEq, Queryable, Selectable)]
#[diesel(table_name = schedules, check_for_backend(diesel::pg::Pg))]
pub struct ScheduleRow {
    pub name: String,
    pub interval_ms: i64,
    pub next_run_at: OffsetDateTime,
    pub last_run_at: Option<OffsetDateTime>,
    pub last_finished_at: Option<OffsetDateTime>,
    pub runs: i64,
    pub last_outcome: Option<String>,
    pub last_detail: Option<String>,
    pub cursor_id: Option<Uuid>,
    pub pass_started_at: Option<OffsetDateTime>,
}

/// Every schedule that ever ran.
pub async fn list(conn: &mut AsyncPgConnection) -> Result<Vec<ScheduleRow>, DbError> {
    Ok(schedules::table
        .order(schedules::name)
        .select(ScheduleRow::as_select())
        .load(conn)
        .await?)
}

/// Where a walking schedule (the scrub) stands, its row locked for the run's transaction.
#[derive(Debug, Clone, QueryableByName)]
pub struct Walk {
    /// The last row reached; `None` between passes.
    #[diesel(sql_type = Nullable<SqlUuid>)]
    pub cursor_id: Option<Uuid>,
    /// No pass ever started, or the last one started at least a pass interval ago.
    #[diesel(sql_type = Bool)]
    pub pass_due: bool,
    /// When the next pass may start (`None`: at once).
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub next_pass_at: Option<OffsetDateTime>,
}

/// Locks the schedule's row for the run of `slot` and says where its walk stands, or
/// `None` when a later slot was claimed meanwhile (this run is stale and does nothing).
/// A pass is due once `pass_every` has gone by since the last one started.
pub async fn lock_walk(
    conn: &mut AsyncPgConnection,
    slot: &Slot,
    pass_every: Duration,
) -> Result<Option<Walk>, DbError> {
    Ok(diesel::sql_query(
        "SELECT cursor_id, \
                (pass_started_at IS NULL OR pass_started_at <= now() - make_interval(secs => $3::float8 / 1000)) AS pass_due, \
                pass_started_at + make_interval(secs => $3::float8 / 1000) AS next_pass_at \
         FROM schedules WHERE name = $1 AND runs = $2 FOR UPDATE",
    )
    .bind::<Text, _>(&slot.name)
    .bind::<Int8, _>(slot.runs)
    .bind::<Int8, _>(millis(pass_every))
    .get_result::<Walk>(conn)
    .await
    .optional()?)
}

/// Moves the walk of `slot` to `cursor` (`None`: the pass is complete); `started_pass`
/// stamps the pass's start. Fenced like [`finish`].
pub async fn save_walk(
    conn: &mut AsyncPgConnection,
    slot: &Slot,
    cursor: Option<Uuid>,
    started_pass: bool,
) -> Result<bool, DbError> {
    let changed = diesel::sql_query(
        "UPDATE schedules SET cursor_id = $3, \
             pass_started_at = CASE WHEN $4 THEN now() ELSE pass_started_at END \
         WHERE name = $1 AND runs = $2",
    )
    .bind::<Text, _>(&slot.name)
    .bind::<Int8, _>(slot.runs)
    .bind::<Nullable<SqlUuid>, _>(cursor)
    .bind::<Bool, _>(started_pass)
    .execute(conn)
    .await?;
    Ok(changed == 1)
}

/// A trashed document whose time in the trash is up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, QueryableByName)]
pub struct ExpiredTrash {
    #[diesel(sql_type = SqlUuid)]
    pub tenant_id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    pub document_id: Uuid,
}

/// At most `limit` documents of active tenants trashed more than `trash_days` ago and
/// not being purged (no active job of `purge_type`), taken in turns: each tenant's
/// oldest first, then each tenant's second, … — one tenant's whole trash never comes
/// before another's first.
pub async fn expired_trash(
    conn: &mut AsyncPgConnection,
    trash_days: u32,
    purge_type: &str,
    limit: i64,
) -> Result<Vec<ExpiredTrash>, DbError> {
    Ok(diesel::sql_query(
        "SELECT c.tenant_id, c.id AS document_id FROM tenants AS t \
         CROSS JOIN LATERAL ( \
             SELECT d.tenant_id, d.id, d.trashed_at, \
                    row_number() OVER (ORDER BY d.trashed_at, d.id) AS turn \
             FROM documents AS d \
             WHERE d.tenant_id = t.id AND d.trashed_at IS NOT NULL \
               AND d.trashed_at <= now() - make_interval(days => $1) \
               AND NOT EXISTS ( \
                   SELECT 1 FROM processing_jobs AS j \
                   WHERE j.document_id = d.id AND j.job_type = $2 \
                     AND j.status IN ('QUEUED', 'RUNNING')) \
             ORDER BY d.trashed_at, d.id LIMIT $3) AS c \
         WHERE t.status = 'active' \
         ORDER BY c.turn, c.trashed_at, c.id LIMIT $3",
    )
    .bind::<Int4, _>(i32::try_from(trash_days).unwrap_or(i32::MAX))
    .bind::<Text, _>(purge_type)
    .bind::<Int8, _>(limit)
    .load(conn)
    .await?)
}

#[derive(QueryableByName)]
struct Id {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
}

/// Of `ids`, the tenant's documents still trashed more than `trash_days` ago, locked
/// until the transaction ends (a restore waits, then withdraws the purge); a document
/// another transaction holds (a purge running, a restore) is skipped, never waited for.
pub async fn lock_expired_trash(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    ids: &[Uuid],
    trash_days: u32,
) -> Result<Vec<Uuid>, DbError> {
    let rows: Vec<Id> = diesel::sql_query(
        "SELECT id FROM documents \
         WHERE tenant_id = $1 AND id = ANY($2) AND trashed_at IS NOT NULL \
           AND trashed_at <= now() - make_interval(days => $3) \
         ORDER BY id FOR UPDATE SKIP LOCKED",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<Array<SqlUuid>, _>(ids)
    .bind::<Int4, _>(i32::try_from(trash_days).unwrap_or(i32::MAX))
    .load(conn)
    .await?;
    Ok(rows.into_iter().map(|row| row.id).collect())
}

/// A stored version the scrub walks past.
#[derive(Debug, Clone, Copy, PartialEq, Eq, QueryableByName)]
pub struct ScrubbedVersion {
    #[diesel(sql_type = SqlUuid)]
    pub version_id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    pub document_id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    pub tenant_id: Uuid,
    /// Its tenant is active and its document not trashed: a verify job would run.
    #[diesel(sql_type = Bool)]
    pub verifiable: bool,
}

/// The next `limit` versions after `cursor`, in id order (UUIDv7: the order they were
/// stored in, so a version stored during a pass is reached by the same pass).
pub async fn versions_after(
    conn: &mut AsyncPgConnection,
    cursor: Uuid,
    limit: i64,
) -> Result<Vec<ScrubbedVersion>, DbError> {
    Ok(diesel::sql_query(
        "SELECT v.id AS version_id, v.document_id, v.tenant_id, \
                (t.status = 'active' AND d.trashed_at IS NULL) AS verifiable \
         FROM document_versions AS v \
         JOIN documents AS d ON d.id = v.document_id \
         JOIN tenants AS t ON t.id = v.tenant_id \
         WHERE v.id > $1 ORDER BY v.id LIMIT $2",
    )
    .bind::<SqlUuid, _>(cursor)
    .bind::<Int8, _>(limit)
    .load(conn)
    .await?)
}
