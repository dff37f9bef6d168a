//! The live-worker registry (operators only; the job path never reads it).

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use time::OffsetDateTime;

use super::DbError;
use super::schema::workers;

/// A worker not seen for this long is gone (its heartbeat runs every few seconds).
pub const LIVE_WITHIN_SECONDS: i64 = 30;

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = workers, check_for_backend(diesel::pg::Pg))]
pub struct WorkerRow {
    pub id: String,
    pub host: String,
    pub pid: i32,
    pub slots: i32,
    pub busy: i32,
    pub queues: Vec<String>,
    pub started_at: OffsetDateTime,
    pub last_seen_at: OffsetDateTime,
    /// Of its slots, those an analysis may run in; `None` from a worker of before.
    pub analysis_slots: Option<i32>,
}

impl WorkerRow {
    /// Its analysis slots as operators see them (dashboard, `quire-admin workers`): "-"
    /// from a worker of before they existed.
    pub fn analysis_slots_label(&self) -> String {
        self.analysis_slots
            .map_or_else(|| "-".to_owned(), |slots| slots.to_string())
    }
}

/// What a worker reports of itself.
#[derive(Debug, Clone)]
pub struct WorkerReport<'a> {
    pub id: &'a str,
    pub host: &'a str,
    pub pid: i32,
    pub slots: i32,
    pub busy: i32,
    pub queues: &'a [String],
    /// Of its slots, those an analysis may run in (`worker.analysis_concurrency`, at
    /// most `slots`).
    pub analysis_slots: i32,
}

/// Inserts or refreshes the worker's row.
pub async fn report(
    conn: &mut AsyncPgConnection,
    worker: &WorkerReport<'_>,
) -> Result<(), DbError> {
    diesel::insert_into(workers::table)
        .values((
            workers::id.eq(worker.id),
            workers::host.eq(worker.host),
            workers::pid.eq(worker.pid),
            workers::slots.eq(worker.slots),
            workers::busy.eq(worker.busy),
            workers::queues.eq(worker.queues),
            workers::analysis_slots.eq(worker.analysis_slots),
        ))
        .on_conflict(workers::id)
        .do_update()
        .set((
            workers::busy.eq(worker.busy),
            workers::slots.eq(worker.slots),
            workers::analysis_slots.eq(worker.analysis_slots),
            workers::last_seen_at.eq(diesel::dsl::now),
        ))
        .execute(conn)
        .await?;
    Ok(())
}

/// Removes the worker's row (a clean stop).
pub async fn remove(conn: &mut AsyncPgConnection, id: &str) -> Result<(), DbError> {
    diesel::delete(workers::table.find(id))
        .execute(conn)
        .await?;
    Ok(())
}

/// Workers seen within `LIVE_WITHIN_SECONDS`, by id. On the database clock, which
/// stamped `last_seen_at`, never this process's: the API or CLI host asking and the
/// database host may disagree by minutes, which would hide live workers or show dead ones.
pub async fn live(conn: &mut AsyncPgConnection) -> Result<Vec<WorkerRow>, DbError> {
    let since = diesel::dsl::sql::<diesel::sql_types::Timestamptz>(&format!(
        "now() - interval '{LIVE_WITHIN_SECONDS} seconds'"
    ));
    Ok(workers::table
        .filter(workers::last_seen_at.gt(since))
        .order(workers::id.asc())
        .select(WorkerRow::as_select())
        .load(conn)
        .await?)
}

/// Forgets workers not seen for an hour (the dispatcher's worker-pruning service). On
/// the database clock, which stamped `last_seen_at`: dispatcher and worker hosts' clocks
/// may disagree.
pub async fn prune_gone(conn: &mut AsyncPgConnection) -> Result<usize, DbError> {
    let an_hour_ago =
        diesel::dsl::sql::<diesel::sql_types::Timestamptz>("now() - interval '1 hour'");
    Ok(
        diesel::delete(workers::table.filter(workers::last_seen_at.lt(an_hour_ago)))
            .execute(conn)
            .await?,
    )
}
