//! The fault oracle (feature `fault-injection`): `fault-test` jobs, enqueued directly, and
//! the tables their handler writes (see `jobs/types/fault_test.rs`). A test of the queue
//! itself needs no document: a `fault-test` job runs, fails, retries or stops as told.

use diesel_async::{AsyncConnection, RunQueryDsl};
use uuid::Uuid;

use crate::db::jobs::{self, NewJob, Priority};
use crate::db::{DbError, PgPool};
use crate::jobs::FaultTest;

/// Creates the tables the `fault-test` handler writes: its starts and its effects. A
/// handler run without them fails, so any test that runs a `fault-test` job calls this.
pub async fn create_oracle_tables(pool: &PgPool) {
    let mut conn = pool.get().await.expect("connection");
    for statement in [
        "CREATE TABLE IF NOT EXISTS fault_effects ( \
             job_id uuid PRIMARY KEY, duplicates integer NOT NULL DEFAULT 0, \
             at timestamptz NOT NULL DEFAULT now())",
        "CREATE TABLE IF NOT EXISTS fault_starts ( \
             id bigserial PRIMARY KEY, job_id uuid NOT NULL, worker_id text NOT NULL, \
             attempt integer NOT NULL, at timestamptz NOT NULL DEFAULT now())",
    ] {
        diesel::sql_query(statement)
            .execute(&mut conn)
            .await
            .expect("create oracle table");
    }
}

/// Enqueues `count` `fault-test` jobs of `tenant_id` with `payload`, committed in batches
/// of 250 so that thousands of them take seconds, not minutes.
pub async fn enqueue_fault_jobs(
    pool: &PgPool,
    tenant_id: Uuid,
    count: usize,
    payload: FaultTest,
    max_attempts: i32,
) -> Vec<Uuid> {
    enqueue_fault_jobs_in(
        pool,
        tenant_id,
        count,
        payload,
        max_attempts,
        Priority::Interactive,
    )
    .await
}

/// [`enqueue_fault_jobs`] in the priority class `priority`.
pub async fn enqueue_fault_jobs_in(
    pool: &PgPool,
    tenant_id: Uuid,
    count: usize,
    payload: FaultTest,
    max_attempts: i32,
    priority: Priority,
) -> Vec<Uuid> {
    let mut conn = pool.get().await.expect("connection");
    let mut ids = Vec::with_capacity(count);
    for chunk in (0..count).collect::<Vec<_>>().chunks(250) {
        let batch = conn
            .transaction::<_, DbError, _>(async |conn| {
                let mut batch = Vec::with_capacity(chunk.len());
                for _ in chunk {
                    let job =
                        NewJob::new(tenant_id, payload, max_attempts, None).with_priority(priority);
                    let enqueued = jobs::enqueue(conn, &job)
                        .await?
                        .expect("a fault job never conflicts");
                    batch.push(enqueued.job_id);
                }
                Ok(batch)
            })
            .await
            .expect("enqueue fault jobs");
        ids.extend(batch);
    }
    ids
}

/// How many handler starts the oracle logged.
pub async fn started_runs(pool: &PgPool) -> i64 {
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::Int8)]
        count: i64,
    }
    let mut conn = pool.get().await.expect("connection");
    diesel::sql_query("SELECT count(*) AS count FROM fault_starts")
        .get_result::<Count>(&mut conn)
        .await
        .expect("count starts")
        .count
}
