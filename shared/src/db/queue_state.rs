//! The stored snapshot of the queue's state (`queue_state_snapshot`, one row): written
//! by the one dispatcher that refreshes it in an interval, read by every scrape.

use std::time::Duration;

use diesel::sql_types::{BigInt, Double, Jsonb};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use super::DbError;
use super::jobs::duration_millis;

/// The stored snapshot as a scrape reads it.
#[derive(Debug, Clone, PartialEq, diesel::QueryableByName)]
pub struct Snapshot {
    #[diesel(sql_type = Jsonb)]
    pub state: serde_json::Value,
    /// Seconds since it was computed, on the database clock.
    #[diesel(sql_type = Double)]
    pub age_seconds: f64,
    /// Refreshes since the row was created, by any dispatcher.
    #[diesel(sql_type = BigInt)]
    pub refreshes: i64,
}

#[derive(diesel::QueryableByName)]
struct Due {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    due: bool,
}

#[derive(diesel::QueryableByName)]
struct Refreshes {
    #[diesel(sql_type = BigInt)]
    refreshes: i64,
}

/// The stored snapshot, if any dispatcher computed one yet: one read by primary key.
pub async fn load(conn: &mut AsyncPgConnection) -> Result<Option<Snapshot>, DbError> {
    use diesel::OptionalExtension;
    Ok(diesel::sql_query(
        "SELECT state, extract(epoch FROM now() - refreshed_at)::float8 AS age_seconds, \
                refreshes \
         FROM queue_state_snapshot WHERE id",
    )
    .get_result(conn)
    .await
    .optional()?)
}

/// Whether the snapshot is missing or at least `interval` old (on the database clock),
/// so that a refresh is due.
pub async fn is_due(conn: &mut AsyncPgConnection, interval: Duration) -> Result<bool, DbError> {
    Ok(diesel::sql_query(
        "SELECT NOT EXISTS (SELECT 1 FROM queue_state_snapshot \
                            WHERE id AND refreshed_at > now() - $1 * interval '1 millisecond') \
                AS due",
    )
    .bind::<BigInt, _>(duration_millis(interval))
    .get_result::<Due>(conn)
    .await?
    .due)
}

/// Stores a freshly computed state and counts the refresh; returns the refresh count.
pub async fn store(
    conn: &mut AsyncPgConnection,
    state: &serde_json::Value,
) -> Result<i64, DbError> {
    Ok(diesel::sql_query(
        "INSERT INTO queue_state_snapshot (id, state) VALUES (true, $1) \
         ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, refreshed_at = now(), \
                                        refreshes = queue_state_snapshot.refreshes + 1 \
         RETURNING refreshes",
    )
    .bind::<Jsonb, _>(state)
    .get_result::<Refreshes>(conn)
    .await?
    .refreshes)
}
