//! What the database says about the bench's jobs: its commit counter, the spans of
//! each job's path (from the rows' own timestamps) and how many are left.

use std::time::{Duration, Instant};

use anyhow::bail;
use diesel::QueryableByName;
use diesel::sql_types::{Array, BigInt, Double, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use quire_shared::db::{DbError, PgPool};
use quire_shared::publishing::Express;
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(diesel::QueryableByName)]
struct Commits {
    #[diesel(sql_type = BigInt)]
    commits: i64,
}

pub async fn commits(conn: &mut AsyncPgConnection) -> Result<i64, DbError> {
    Ok(diesel::sql_query(
        "SELECT xact_commit AS commits FROM pg_stat_database WHERE datname = current_database()",
    )
    .get_result::<Commits>(conn)
    .await?
    .commits)
}

#[derive(diesel::QueryableByName, Default)]
pub struct Spans {
    #[diesel(sql_type = BigInt)]
    pub finished: i64,
    #[diesel(sql_type = BigInt)]
    pub succeeded: i64,
    #[diesel(sql_type = Double)]
    pub drain_seconds: f64,
    #[diesel(sql_type = Double)]
    pub start_p50: f64,
    #[diesel(sql_type = Double)]
    pub start_p95: f64,
    #[diesel(sql_type = Double)]
    pub start_p99: f64,
    #[diesel(sql_type = Double)]
    pub start_max: f64,
    #[diesel(sql_type = Double)]
    pub finish_p50: f64,
    #[diesel(sql_type = Double)]
    pub finish_p95: f64,
    #[diesel(sql_type = Double)]
    pub finish_p99: f64,
    #[diesel(sql_type = Double)]
    pub finish_max: f64,
    #[diesel(sql_type = Double)]
    pub publish_p50: f64,
    #[diesel(sql_type = Double)]
    pub publish_p99: f64,
    // The path of a job, medians of each leg: commit → the dispatcher's claim of its
    // event (NOTIFY and wake-up), that claim → marked published (claim statement, push,
    // the mark's start), that claim → the worker's claim (the push, the pop and the
    // claim statement's start), the worker's claim → its finish.
    #[diesel(sql_type = Double)]
    pub hop_wake_p50: f64,
    #[diesel(sql_type = Double)]
    pub hop_publish_p50: f64,
    #[diesel(sql_type = Double)]
    pub hop_pickup_p50: f64,
    #[diesel(sql_type = Double)]
    pub hop_run_p50: f64,
    // The same legs' 99th percentiles: which leg holds a tail.
    #[diesel(sql_type = Double)]
    pub hop_wake_p99: f64,
    #[diesel(sql_type = Double)]
    pub hop_publish_p99: f64,
    #[diesel(sql_type = Double)]
    pub hop_pickup_p99: f64,
    #[diesel(sql_type = Double)]
    pub hop_run_p99: f64,
}

/// A job the bench enqueued, and when its commit returned (this machine's clock, which
/// PostgreSQL shares): the start of every "commit → …" span.
#[derive(Debug, Clone, Copy)]
pub struct Committed {
    pub job_id: Uuid,
    pub at: OffsetDateTime,
}

/// Counts and timings of `jobs`, in milliseconds (drain in s): starts, finishes and
/// publications from the database clock, commits from the bench's.
pub async fn spans(conn: &mut AsyncPgConnection, jobs: &[Committed]) -> Result<Spans, DbError> {
    let ids: Vec<Uuid> = jobs.iter().map(|job| job.job_id).collect();
    let commits: Vec<OffsetDateTime> = jobs.iter().map(|job| job.at).collect();
    Ok(diesel::sql_query(
        "WITH c AS (SELECT * FROM unnest($1::uuid[], $2::timestamptz[]) AS c(id, committed_at)), \
         j AS (SELECT p.*, c.committed_at FROM processing_jobs p JOIN c ON p.id = c.id), \
         e AS (SELECT e.*, j.committed_at, j.started_at, j.finished_at \
               FROM outbox_events e JOIN j ON e.job_id = j.id) \
         SELECT count(*) FILTER (WHERE j.finished_at IS NOT NULL) AS finished, \
           count(*) FILTER (WHERE j.status = 'SUCCEEDED') AS succeeded, \
           coalesce(extract(epoch FROM max(j.finished_at) - min(j.started_at)), 0)::float8 AS drain_seconds, \
           coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM j.started_at - j.committed_at) * 1000), 0)::float8 AS start_p50, \
           coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM j.started_at - j.committed_at) * 1000), 0)::float8 AS start_p95, \
           coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM j.started_at - j.committed_at) * 1000), 0)::float8 AS start_p99, \
           coalesce(max(extract(epoch FROM j.started_at - j.committed_at) * 1000), 0)::float8 AS start_max, \
           coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM j.finished_at - j.committed_at) * 1000), 0)::float8 AS finish_p50, \
           coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM j.finished_at - j.committed_at) * 1000), 0)::float8 AS finish_p95, \
           coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM j.finished_at - j.committed_at) * 1000), 0)::float8 AS finish_p99, \
           coalesce(max(extract(epoch FROM j.finished_at - j.committed_at) * 1000), 0)::float8 AS finish_max, \
           coalesce((SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM published_at - committed_at) * 1000) FROM e), 0)::float8 AS publish_p50, \
           coalesce((SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM published_at - committed_at) * 1000) FROM e), 0)::float8 AS publish_p99, \
           coalesce((SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM claimed_at - committed_at) * 1000) FROM e), 0)::float8 AS hop_wake_p50, \
           coalesce((SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM published_at - claimed_at) * 1000) FROM e), 0)::float8 AS hop_publish_p50, \
           coalesce((SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - claimed_at) * 1000) FROM e), 0)::float8 AS hop_pickup_p50, \
           coalesce((SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at) * 1000) FROM e), 0)::float8 AS hop_run_p50, \
           coalesce((SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM claimed_at - committed_at) * 1000) FROM e), 0)::float8 AS hop_wake_p99, \
           coalesce((SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM published_at - claimed_at) * 1000) FROM e), 0)::float8 AS hop_publish_p99, \
           coalesce((SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - claimed_at) * 1000) FROM e), 0)::float8 AS hop_pickup_p99, \
           coalesce((SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at) * 1000) FROM e), 0)::float8 AS hop_run_p99 \
         FROM j",
    )
    .bind::<Array<SqlUuid>, _>(ids)
    .bind::<Array<Timestamptz>, _>(commits)
    .get_result(conn)
    .await?)
}

#[derive(QueryableByName)]
struct Remaining {
    #[diesel(sql_type = BigInt)]
    remaining: i64,
}

/// Jobs of the bench's tenant and type still queued or running. Cheap (the partial
/// indexes of queued and running jobs), so polling it does not slow the drain it
/// watches: computing the spans over every job on each poll took a third of a core.
pub async fn remaining(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    job_type: &str,
) -> Result<i64, DbError> {
    Ok(diesel::sql_query(
        "SELECT (SELECT count(*) FROM processing_jobs \
                 WHERE status = 'QUEUED' AND job_type = $2 AND tenant_id = $1) \
              + (SELECT count(*) FROM processing_jobs \
                 WHERE status = 'RUNNING' AND job_type = $2 AND tenant_id = $1) AS remaining",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<Text, _>(job_type)
    .get_result::<Remaining>(conn)
    .await?
    .remaining)
}

/// Waits until none of `tenant_id`'s jobs of `job_type` is queued or running, `limit` at
/// most; the count is read every 100 ms.
pub async fn wait_drained(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    job_type: &str,
    limit: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        let left = remaining(conn, tenant_id, job_type).await?;
        if left == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{left} jobs still unfinished after {}s", limit.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until none of the bench's jobs (`job_type` in `tenant_id`) is queued or running,
/// then measures `jobs`, once the marks of the events `express` published are written
/// (they come a linger after the push, possibly after the last finish).
pub async fn wait_finished(
    pool: &PgPool,
    tenant_id: Uuid,
    job_type: &str,
    jobs: &[Committed],
    express: Option<&Express>,
) -> anyhow::Result<Spans> {
    let mut conn = pool.get().await?;
    wait_drained(&mut conn, tenant_id, job_type, Duration::from_secs(600)).await?;
    if let Some(express) = express {
        express.flush().await;
    }
    let spans = spans(&mut conn, jobs).await?;
    if spans.finished as usize != jobs.len() {
        bail!("only {} of {} jobs finished", spans.finished, jobs.len());
    }
    Ok(spans)
}

#[derive(QueryableByName)]
struct Queued {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
    #[diesel(sql_type = Timestamptz)]
    queued_at: OffsetDateTime,
}

/// Jobs another process enqueued (the API, for an upload), each with its `queued_at`:
/// its transaction's start on the database clock, the nearest the bench sees to the
/// moment the commit was asked for. In the order of `job_ids`.
pub async fn queued_at(
    conn: &mut AsyncPgConnection,
    job_ids: &[Uuid],
) -> Result<Vec<Committed>, DbError> {
    let rows: Vec<Queued> = diesel::sql_query(
        "SELECT p.id, p.queued_at FROM unnest($1::uuid[]) WITH ORDINALITY AS j(id, n) \
         JOIN processing_jobs p ON p.id = j.id ORDER BY j.n",
    )
    .bind::<Array<SqlUuid>, _>(job_ids)
    .load(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| Committed {
            job_id: row.id,
            at: row.queued_at,
        })
        .collect())
}
