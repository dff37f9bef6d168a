//! The history of the `scale` scenario: finished jobs and their outbox events, written
//! straight into the tables (`history.sql`) the way real traffic leaves them, then vacuumed
//! and analysed as autovacuum would have done by then.

use std::time::Instant;

use anyhow::ensure;
use diesel::QueryableByName;
use diesel::sql_types::{Array, BigInt, Double, Integer, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use quire_shared::db::PgPool;
use uuid::Uuid;

/// Jobs per seeding statement, each committed on its own.
const CHUNK: u64 = 200_000;

/// The history spans this many seconds before now: inside every retention window.
const SPAN_SECONDS: f64 = 6.0 * 86_400.0;

/// What the seeding wrote (the jobs counted in the table afterwards) and what it took.
#[derive(Debug, Clone, Copy, Default)]
pub struct Seeded {
    pub jobs: u64,
    pub events: u64,
    pub seed_seconds: f64,
    pub vacuum_seconds: f64,
    /// The two tables with their indexes and TOAST, after the vacuum (the events' over
    /// their partitions: a partitioned table's own size is 0).
    pub jobs_bytes: i64,
    pub events_bytes: i64,
}

#[derive(QueryableByName)]
struct Sizes {
    #[diesel(sql_type = BigInt)]
    jobs: i64,
    #[diesel(sql_type = BigInt)]
    jobs_bytes: i64,
    #[diesel(sql_type = BigInt)]
    events_bytes: i64,
}

/// Writes `jobs` finished jobs with `events_per_job` events each: half of them in
/// `measured`, the rest round-robin over `others`.
pub async fn seed(
    pool: &PgPool,
    measured: Uuid,
    others: &[Uuid],
    jobs: u64,
    events_per_job: u32,
) -> anyhow::Result<Seeded> {
    ensure!(
        !others.is_empty(),
        "the history needs one tenant besides the measured one"
    );
    ensure!(
        events_per_job >= 1,
        "every finished job has at least one event"
    );
    let tenants: Vec<Uuid> = std::iter::once(measured)
        .chain(others.iter().copied())
        .collect();
    let mut conn = pool.get().await?;
    let started = Instant::now();
    let mut events = 0;
    for lo in (0..jobs).step_by(CHUNK as usize) {
        let hi = (lo + CHUNK).min(jobs);
        events += diesel::sql_query(include_str!("history.sql"))
            .bind::<BigInt, _>(i64::try_from(lo)?)
            .bind::<BigInt, _>(i64::try_from(hi)?)
            .bind::<BigInt, _>(i64::try_from(jobs)?)
            .bind::<Integer, _>(i32::try_from(events_per_job)?)
            .bind::<Array<SqlUuid>, _>(&tenants)
            .bind::<Double, _>(SPAN_SECONDS)
            .execute(&mut conn)
            .await? as u64;
        let elapsed = started.elapsed().as_secs_f64();
        eprintln!(
            "bench: history {hi} of {jobs} jobs ({:.0} jobs/s)",
            hi as f64 / elapsed.max(f64::EPSILON)
        );
    }
    let seed_seconds = started.elapsed().as_secs_f64();
    let started = Instant::now();
    diesel::sql_query("VACUUM (ANALYZE) processing_jobs, outbox_events")
        .execute(&mut conn)
        .await?;
    let vacuum_seconds = started.elapsed().as_secs_f64();
    let sizes: Sizes = diesel::sql_query(
        "SELECT (SELECT count(*) FROM processing_jobs WHERE worker_id = 'history-worker') AS jobs, \
                pg_total_relation_size('processing_jobs') AS jobs_bytes, \
                (SELECT sum(pg_total_relation_size(relid))::int8 \
                   FROM pg_partition_tree('outbox_events') WHERE isleaf) AS events_bytes",
    )
    .get_result(&mut conn)
    .await?;
    ensure!(
        sizes.jobs == i64::try_from(jobs)?,
        "the history holds {} jobs, not {jobs}",
        sizes.jobs
    );
    Ok(Seeded {
        jobs,
        events,
        seed_seconds,
        vacuum_seconds,
        jobs_bytes: sizes.jobs_bytes,
        events_bytes: sizes.events_bytes,
    })
}
