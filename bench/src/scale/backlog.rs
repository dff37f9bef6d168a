//! The backlog of the `scale` scenario: many no-op jobs queued at once in a tenant of their
//! own, then how fast the stack drains them from the first tenth to the last.

use std::time::{Duration, Instant};

use anyhow::bail;
use diesel::QueryableByName;
use diesel::sql_types::{
    Array, BigInt, Bool, Double, Nullable, Text, Timestamptz, Uuid as SqlUuid,
};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use quire_shared::db::DbError;
use quire_shared::jobs::{BackgroundJob, BenchNoop};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::measure;
use crate::workload::Bench;

/// Jobs per enqueue statement of the backlog: bulk work arrives in bursts.
const BATCH: usize = 1000;

/// Enqueues `count` no-op jobs in `bench`'s tenant, [`BATCH`] per statement; the seconds
/// it took.
pub async fn enqueue(
    conn: &mut AsyncPgConnection,
    bench: &Bench,
    count: usize,
) -> anyhow::Result<f64> {
    let started = Instant::now();
    for start in (0..count).step_by(BATCH) {
        bench
            .enqueue(conn, start..(start + BATCH).min(count), &[])
            .await?;
        if (start / BATCH) % 100 == 99 {
            eprintln!("bench: backlog {} of {count} queued", start + BATCH);
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

#[derive(QueryableByName)]
struct Left {
    #[diesel(sql_type = Bool)]
    left: bool,
}

/// Whether any no-op job of `tenant_id` is still queued or running. It stops at the first
/// one, so polling it costs the drain nothing however long the backlog is (a count would
/// read every queued row).
async fn any_left(conn: &mut AsyncPgConnection, tenant_id: Uuid) -> Result<bool, DbError> {
    Ok(diesel::sql_query(
        "SELECT EXISTS (SELECT 1 FROM processing_jobs \
                        WHERE status = 'QUEUED' AND job_type = $2 AND tenant_id = $1) \
             OR EXISTS (SELECT 1 FROM processing_jobs \
                        WHERE status = 'RUNNING' AND job_type = $2 AND tenant_id = $1) AS left",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<Text, _>(BenchNoop::JOB_TYPE)
    .get_result::<Left>(conn)
    .await?
    .left)
}

/// Waits until the backlog of `tenant_id` is drained, `limit` at most, saying how much is
/// left once a minute.
pub async fn wait_drained(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    limit: Duration,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut said = Instant::now();
    while any_left(conn, tenant_id).await? {
        if started.elapsed() > limit {
            bail!("the backlog is not drained after {}s", limit.as_secs());
        }
        if said.elapsed() > Duration::from_secs(60) {
            let left = measure::remaining(conn, tenant_id, BenchNoop::JOB_TYPE).await?;
            eprintln!("bench: backlog {left} left");
            said = Instant::now();
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(())
}

/// How the backlog drained, from the database's own timestamps.
#[derive(Debug, Clone, QueryableByName)]
pub struct Drained {
    /// Every job of the backlog, and those of them that succeeded.
    #[diesel(sql_type = BigInt)]
    pub all_jobs: i64,
    #[diesel(sql_type = BigInt)]
    pub succeeded: i64,
    /// The jobs measured: those that finished after the measure began.
    #[diesel(sql_type = BigInt)]
    pub jobs: i64,
    /// The measure's start (the first start, or the instant given) to the last finish.
    #[diesel(sql_type = Double)]
    pub drain_seconds: f64,
    /// Seconds from the measure's start until the first `first_jobs` had finished.
    #[diesel(sql_type = Double)]
    pub first_seconds: f64,
    /// Seconds from the measure's start until each tenth had finished (ten marks).
    #[diesel(sql_type = Array<Double>)]
    pub tenths: Vec<f64>,
}

impl Drained {
    pub fn jobs_per_second(&self) -> f64 {
        self.jobs as f64 / self.drain_seconds.max(f64::EPSILON)
    }

    /// Jobs per second within each tenth of the backlog.
    pub fn tenth_rates(&self) -> Vec<f64> {
        let tenth = self.jobs as f64 / 10.0;
        let mut before = 0.0;
        self.tenths
            .iter()
            .map(|&mark| {
                let rate = tenth / (mark - before).max(f64::EPSILON);
                before = mark;
                rate
            })
            .collect()
    }
}

/// How the no-op jobs of `tenant_id` drained after `since` (database clock; `None`: from
/// the first start); `first_jobs` sets the first mark (the rate of a small drain's size,
/// at the head of this one).
pub async fn drained(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    first_jobs: usize,
    since: Option<OffsetDateTime>,
) -> Result<Drained, DbError> {
    diesel::sql_query(
        "WITH b AS MATERIALIZED (SELECT status, started_at, finished_at FROM processing_jobs \
                                 WHERE tenant_id = $1 AND job_type = $2), \
         m AS MATERIALIZED (SELECT * FROM b WHERE finished_at > coalesce($4, '-infinity')), \
         n AS (SELECT greatest(count(*), 1) AS n FROM m), \
         s AS (SELECT count(*) AS jobs, \
                      greatest(coalesce($4, '-infinity'), min(started_at)) AS origin, \
                      max(finished_at) AS last_finish, \
                      percentile_disc(least($3::float8 / (SELECT n FROM n), 1)) \
                        WITHIN GROUP (ORDER BY finished_at) AS first_mark, \
                      percentile_disc(ARRAY[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]) \
                        WITHIN GROUP (ORDER BY finished_at) AS marks \
               FROM m) \
         SELECT (SELECT count(*) FROM b) AS all_jobs, \
                (SELECT count(*) FROM b WHERE status = 'SUCCEEDED') AS succeeded, jobs, \
                coalesce(extract(epoch FROM last_finish - origin), 0)::float8 AS drain_seconds, \
                coalesce(extract(epoch FROM first_mark - origin), 0)::float8 AS first_seconds, \
                coalesce((SELECT array_agg(extract(epoch FROM u.m - origin)::float8 ORDER BY u.n) \
                          FROM unnest(marks) WITH ORDINALITY AS u(m, n)), '{}') AS tenths \
         FROM s",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<Text, _>(BenchNoop::JOB_TYPE)
    .bind::<Double, _>(first_jobs as f64)
    .bind::<Nullable<Timestamptz>, _>(since)
    .get_result(conn)
    .await
    .map_err(DbError::from)
}

#[derive(QueryableByName)]
struct Now {
    #[diesel(sql_type = Timestamptz)]
    now: OffsetDateTime,
}

/// The database's clock: where a measure of the drain begins.
pub async fn now(conn: &mut AsyncPgConnection) -> Result<OffsetDateTime, DbError> {
    Ok(diesel::sql_query("SELECT now() AS now")
        .get_result::<Now>(conn)
        .await?
        .now)
}
