//! The checker: per enqueued job, what happened to it.

use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::{Array, Int8, Text, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use quire_shared::db::PgPool;
use quire_shared::test_support::eventually;
use uuid::Uuid;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub enqueued: usize,
    pub succeeded: i64,
    pub failed: i64,
    pub cancelled: i64,
    /// Still QUEUED or RUNNING.
    pub unfinished: i64,
    /// Enqueued, expected to succeed, and without an effect.
    pub lost: i64,
    /// Effects beyond the first, summed over jobs.
    pub duplicated: i64,
    /// Effects of jobs that were never enqueued, or of jobs that did not succeed.
    pub unexpected: i64,
    /// Handler starts the oracle logged (each attempt that reached the handler).
    pub starts: i64,
}

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Int8)]
    count: i64,
}

pub async fn tally(pool: &PgPool, ids: &[Uuid]) -> Tally {
    let mut conn = pool.get().await.expect("connection");
    let rows: Vec<Row> = diesel::sql_query(
        "SELECT status AS name, count(*) AS count FROM processing_jobs WHERE id = ANY($1) GROUP BY status \
         UNION ALL \
         SELECT 'lost', count(*) FROM processing_jobs j WHERE j.id = ANY($1) AND j.status = 'SUCCEEDED' \
             AND NOT EXISTS (SELECT 1 FROM fault_effects f WHERE f.job_id = j.id) \
         UNION ALL \
         SELECT 'duplicated', COALESCE(sum(duplicates), 0) FROM fault_effects WHERE job_id = ANY($1) \
         UNION ALL \
         SELECT 'unexpected', count(*) FROM fault_effects f WHERE NOT (f.job_id = ANY($1)) \
             OR NOT EXISTS (SELECT 1 FROM processing_jobs j WHERE j.id = f.job_id AND j.status = 'SUCCEEDED') \
         UNION ALL \
         SELECT 'starts', count(*) FROM fault_starts WHERE job_id = ANY($1)",
    )
    .bind::<Array<SqlUuid>, _>(ids)
    .load(&mut conn)
    .await
    .expect("tally");
    let mut tally = Tally {
        enqueued: ids.len(),
        ..Tally::default()
    };
    for row in rows {
        match row.name.as_str() {
            "SUCCEEDED" => tally.succeeded = row.count,
            "FAILED" => tally.failed = row.count,
            "CANCELLED" => tally.cancelled = row.count,
            "QUEUED" | "RUNNING" => tally.unfinished += row.count,
            "lost" => tally.lost = row.count,
            "duplicated" => tally.duplicated = row.count,
            "unexpected" => tally.unexpected = row.count,
            "starts" => tally.starts = row.count,
            _ => {}
        }
    }
    // A job that should have succeeded and is not SUCCEEDED is lost too.
    tally
}

/// Waits until none of `ids` is QUEUED or RUNNING.
pub async fn wait_all_finished(pool: &PgPool, ids: &[Uuid], deadline: Duration) {
    eventually(
        deadline,
        &format!("all {} jobs are finished", ids.len()),
        || async {
            let mut conn = pool.get().await.ok()?;
            #[derive(QueryableByName)]
            struct Count {
                #[diesel(sql_type = Int8)]
                count: i64,
            }
            let open = diesel::sql_query(
                "SELECT count(*) AS count FROM processing_jobs \
             WHERE id = ANY($1) AND status IN ('QUEUED', 'RUNNING')",
            )
            .bind::<Array<SqlUuid>, _>(ids)
            .get_result::<Count>(&mut conn)
            .await
            .ok()?;
            (open.count == 0).then_some(())
        },
    )
    .await;
}

/// How many of `ids` are finished (any terminal state).
pub async fn finished(pool: &PgPool, ids: &[Uuid]) -> i64 {
    let Ok(mut conn) = pool.get().await else {
        return 0;
    };
    #[derive(QueryableByName)]
    struct Count {
        #[diesel(sql_type = Int8)]
        count: i64,
    }
    diesel::sql_query(
        "SELECT count(*) AS count FROM processing_jobs \
         WHERE id = ANY($1) AND status IN ('SUCCEEDED', 'FAILED', 'CANCELLED')",
    )
    .bind::<Array<SqlUuid>, _>(ids)
    .get_result::<Count>(&mut conn)
    .await
    .map_or(0, |count| count.count)
}

/// All succeeded, each exactly once, nothing else.
pub fn assert_exactly_once(tally: &Tally) {
    assert_eq!(tally.succeeded, tally.enqueued as i64, "{tally:?}");
    assert_eq!(tally.unfinished, 0, "{tally:?}");
    assert_eq!(tally.lost, 0, "lost jobs: {tally:?}");
    assert_eq!(tally.duplicated, 0, "duplicated effects: {tally:?}");
    assert_eq!(tally.unexpected, 0, "unexpected effects: {tally:?}");
}
