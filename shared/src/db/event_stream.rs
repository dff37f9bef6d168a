//! A tenant's event log read as a stream (`GET /api/events`): where a new reader starts,
//! one page after a position with the retention horizon checked in the same snapshot, and
//! the retention's pruning, which moves that horizon.
//!
//! The horizon (`tenant_event_horizons`) is the last pruned event of each tenant in the
//! log's (txid, id) order, written by the statement that prunes. A position before it
//! may have missed a pruned event (410 for the client); from any later position nothing
//! was pruned that the reader had not seen. No clock is compared: the answer is exact.

use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::{Bool, Int8, Nullable, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::DbError;
use super::tenant_events::{self, EventCursor, TenantEvent};

/// Why a position cannot be read from.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// Events after the position were pruned (older than the retention window).
    #[error("events after this position were pruned")]
    Pruned,
    /// The position names a transaction that has not started: no id this log issued.
    #[error("this position is beyond the log")]
    Beyond,
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<diesel::result::Error> for StreamError {
    fn from(error: diesel::result::Error) -> Self {
        Self::Db(DbError::Query(error))
    }
}

/// One read of the log.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamPage {
    /// In (txid, id) order, at most the limit.
    pub events: Vec<TenantEvent>,
    /// Where the reader stands after these events: the last one's cursor, the position
    /// it was read from when there were none, or for a new reader the log's present.
    pub position: EventCursor,
    /// Events of the tenant after `position` have committed but are held back behind an
    /// older transaction still open (see `tenant_events::list_after`): read again soon,
    /// they will not announce themselves.
    pub held_back: bool,
}

#[derive(QueryableByName)]
struct Head {
    #[diesel(sql_type = Int8)]
    xmin: i64,
    #[diesel(sql_type = Int8)]
    xmax: i64,
    #[diesel(sql_type = Nullable<Int8>)]
    horizon_txid: Option<i64>,
    #[diesel(sql_type = Nullable<Int8>)]
    horizon_id: Option<i64>,
}

#[derive(QueryableByName)]
struct HeldBack {
    #[diesel(sql_type = Bool)]
    held_back: bool,
}

/// Up to `limit` of the tenant's events after `from` (`None`: a new reader, placed at
/// the log's present: it gets every event that commits from now on). One read-only
/// REPEATABLE READ transaction, so the horizon, the events and the held-back check all
/// see one snapshot: a prune that commits meanwhile is seen whole or not at all.
pub async fn read_page(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    from: Option<EventCursor>,
    limit: i64,
) -> Result<StreamPage, StreamError> {
    conn.build_transaction()
        .repeatable_read()
        .read_only()
        .run(async move |conn| {
            let head: Head = diesel::sql_query(
                "SELECT pg_snapshot_xmin(s.snap)::text::bigint AS xmin, \
                        pg_snapshot_xmax(s.snap)::text::bigint AS xmax, \
                        h.txid AS horizon_txid, h.id AS horizon_id \
                 FROM (SELECT pg_current_snapshot() AS snap) AS s \
                 LEFT JOIN tenant_event_horizons h ON h.tenant_id = $1",
            )
            .bind::<SqlUuid, _>(tenant_id)
            .get_result(conn)
            .await?;
            let position = match from {
                // Every transaction below xmin has ended, so every event committed after
                // this snapshot sorts after this position (txid ≥ xmin).
                None => EventCursor {
                    txid: head.xmin.saturating_sub(1),
                    id: i64::MAX,
                },
                Some(cursor) => {
                    if cursor.txid >= head.xmax {
                        return Err(StreamError::Beyond);
                    }
                    if let (Some(txid), Some(id)) = (head.horizon_txid, head.horizon_id)
                        && (txid, id) > (cursor.txid, cursor.id)
                    {
                        return Err(StreamError::Pruned);
                    }
                    cursor
                }
            };
            let events = if from.is_some() {
                tenant_events::list_after(conn, tenant_id, position, limit).await?
            } else {
                Vec::new()
            };
            let full = i64::try_from(events.len()).unwrap_or(i64::MAX) >= limit;
            let position = events.last().map_or(position, EventCursor::of);
            let held_back = if full {
                // More to read anyway: the caller reads the next page at once.
                false
            } else {
                let row: HeldBack = diesel::sql_query(
                    "SELECT EXISTS (SELECT 1 FROM tenant_events \
                         WHERE tenant_id = $1 AND (txid, id) > ($2, $3) AND txid >= $4) \
                     AS held_back",
                )
                .bind::<SqlUuid, _>(tenant_id)
                .bind::<Int8, _>(position.txid)
                .bind::<Int8, _>(position.id)
                .bind::<Int8, _>(head.xmin)
                .get_result(conn)
                .await?;
                row.held_back
            };
            Ok(StreamPage {
                events,
                position,
                held_back,
            })
        })
        .await
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = Int8)]
    count: i64,
}

/// Deletes up to `batch` events older than `age` and moves each tenant's horizon to its
/// last deleted event, in one statement. Returns how many events went.
pub async fn prune(
    conn: &mut AsyncPgConnection,
    age: Duration,
    batch: i64,
) -> Result<usize, DbError> {
    let count = diesel::sql_query(
        "WITH doomed AS ( \
             SELECT id FROM tenant_events \
             WHERE created_at < now() - $1 * interval '1 millisecond' \
             ORDER BY created_at LIMIT $2), \
         gone AS ( \
             DELETE FROM tenant_events e USING doomed WHERE e.id = doomed.id \
             RETURNING e.tenant_id, e.txid, e.id), \
         latest AS ( \
             SELECT DISTINCT ON (tenant_id) tenant_id, txid, id FROM gone \
             ORDER BY tenant_id, txid DESC, id DESC), \
         moved AS ( \
             INSERT INTO tenant_event_horizons AS h (tenant_id, txid, id) \
             SELECT tenant_id, txid, id FROM latest \
             ON CONFLICT (tenant_id) DO UPDATE \
                 SET txid = EXCLUDED.txid, id = EXCLUDED.id, pruned_at = now() \
                 WHERE (h.txid, h.id) < (EXCLUDED.txid, EXCLUDED.id)) \
         SELECT count(*) AS count FROM gone",
    )
    .bind::<Int8, _>(i64::try_from(age.as_millis()).unwrap_or(i64::MAX))
    .bind::<Int8, _>(batch)
    .get_result::<Count>(conn)
    .await?
    .count;
    Ok(usize::try_from(count).unwrap_or(0))
}
