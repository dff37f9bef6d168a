//! Where a phase's rows landed in the heap of the two queue tables: in the pages that were
//! there before the history was written (the empty phase's, freed by the vacuum), in the
//! history's own pages, or in pages added since. A row version written into a page that
//! is not in shared buffers costs a read, a dirty page to write back and, after a
//! checkpoint, a full-page image in the WAL: the statements' counters show those costs,
//! this shows which pages took the rows. The events' rows are counted in the partition
//! that holds the history (`outbox_events_delivered`), where a phase's events end once
//! published: a new event is written to the live partition, whose pages are all recent.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use quire_shared::db::DbError;
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

/// The heap's size in blocks of both tables at one moment.
#[derive(Debug, Clone, Copy, Default, QueryableByName)]
pub struct Blocks {
    #[diesel(sql_type = BigInt)]
    pub jobs: i64,
    #[diesel(sql_type = BigInt)]
    pub events: i64,
}

pub async fn blocks(conn: &mut AsyncPgConnection) -> Result<Blocks, DbError> {
    Ok(diesel::sql_query(
        "SELECT pg_relation_size('processing_jobs') / current_setting('block_size')::int8 AS jobs, \
                pg_relation_size('outbox_events_delivered') / current_setting('block_size')::int8 AS events",
    )
    .get_result(conn)
    .await?)
}

/// The current versions of one table's rows of a tenant created since a moment, by the
/// part of the heap they are in.
#[derive(Debug, Clone, QueryableByName)]
pub struct Placed {
    #[diesel(sql_type = Text)]
    pub table: String,
    #[diesel(sql_type = BigInt)]
    pub rows: i64,
    #[diesel(sql_type = BigInt)]
    pub pages: i64,
    #[diesel(sql_type = BigInt)]
    pub before_history: i64,
    #[diesel(sql_type = BigInt)]
    pub in_history: i64,
    #[diesel(sql_type = BigInt)]
    pub after_history: i64,
}

/// Where the tenant's jobs and events created since `since` are, against the heaps'
/// sizes before (`before`) and after (`after`) the history was written. The rows are
/// found by their UUIDv7 ids, which start with their instant, along each primary key:
/// a filter on `created_at` would read the tenant's whole history (half of it, 15
/// million rows at full size) and fill the cache with it before the backlog phase.
pub async fn placed(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    since: OffsetDateTime,
    before: Blocks,
    after: Blocks,
) -> Result<Vec<Placed>, DbError> {
    Ok(diesel::sql_query(
        "WITH rows AS ( \
             SELECT 'processing_jobs' AS tbl, (ctid::text::point)[0]::int8 AS block, $3 AS lo, $4 AS hi \
             FROM processing_jobs WHERE id >= $2 AND tenant_id = $1 \
             UNION ALL \
             SELECT 'outbox_events_delivered', (ctid::text::point)[0]::int8, $5, $6 \
             FROM outbox_events_delivered WHERE id >= $2 AND tenant_id = $1) \
         SELECT tbl AS \"table\", count(*) AS rows, count(DISTINCT block) AS pages, \
                count(*) FILTER (WHERE block < lo) AS before_history, \
                count(*) FILTER (WHERE block >= lo AND block < hi) AS in_history, \
                count(*) FILTER (WHERE block >= hi) AS after_history \
         FROM rows GROUP BY tbl ORDER BY tbl",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(first_id_at(since))
    .bind::<BigInt, _>(before.jobs)
    .bind::<BigInt, _>(after.jobs)
    .bind::<BigInt, _>(before.events)
    .bind::<BigInt, _>(after.events)
    .load(conn)
    .await?)
}

/// The smallest UUIDv7 of an instant's millisecond: every id made at or after it sorts
/// at or after this one.
fn first_id_at(at: OffsetDateTime) -> Uuid {
    let millis = u64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or_default();
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&millis.to_be_bytes()[2..]);
    bytes[6] = 0x70; // version 7
    bytes[8] = 0x80; // RFC 4122 variant
    Uuid::from_bytes(bytes)
}

pub fn to_json(placed: &[Placed]) -> Value {
    Value::Array(
        placed
            .iter()
            .map(|table| {
                json!({
                    "table": table.table,
                    "rows": table.rows,
                    "pages": table.pages,
                    "before_history": table.before_history,
                    "in_history": table.in_history,
                    "after_history": table.after_history,
                })
            })
            .collect(),
    )
}

pub fn print(placed: &[Placed]) {
    println!();
    println!(
        "  the history phase's rows (current versions) by heap part: before the history / \
         in it / added since, and the pages they fill"
    );
    for table in placed {
        println!(
            "    {}: {} rows: {} / {} / {}, in {} pages",
            table.table,
            table.rows,
            table.before_history,
            table.in_history,
            table.after_history,
            table.pages
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_id_of_an_instant_sorts_before_every_id_made_from_it_on() {
        let at = OffsetDateTime::now_utc();
        let floor = first_id_at(at);
        assert_eq!(floor.get_version_num(), 7);
        let later = Uuid::now_v7();
        assert!(later >= floor, "{later} sorts before {floor}");
        let earlier = first_id_at(at - time::Duration::milliseconds(1));
        assert!(earlier < floor);
    }
}
