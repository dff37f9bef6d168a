//! A job that writes nothing of its own on success frees its slot once the completer has
//! its finish: the next job is claimed and run while that finish still waits for its
//! batch to commit. The finish is held by a real lock, not a sleep.

use diesel_async::RunQueryDsl;
use quire_shared::db::jobs::{self, NewJob};
use quire_shared::jobs::BenchNoop;
use quire_shared::states::JobStatus;
use uuid::Uuid;

use crate::support::World;

/// The advisory lock every `RUNNING → SUCCEEDED` write of this test's database waits for.
const FINISH_LOCK: i64 = 7401;

/// A trigger of this test's own database: each finish waits for [`FINISH_LOCK`], so a
/// session holding it keeps the completer's batch from committing.
async fn hold_every_finish_behind_the_lock(world: &World) {
    let mut conn = world.pool.get().await.expect("connection");
    for statement in [
        format!(
            "CREATE FUNCTION hold_finish() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN PERFORM pg_advisory_xact_lock_shared({FINISH_LOCK}); RETURN NEW; END $$"
        ),
        "CREATE TRIGGER hold_finish BEFORE UPDATE ON processing_jobs FOR EACH ROW \
         WHEN (OLD.status = 'RUNNING' AND NEW.status = 'SUCCEEDED') \
         EXECUTE FUNCTION hold_finish()"
            .to_owned(),
    ] {
        diesel::sql_query(statement)
            .execute(&mut conn)
            .await
            .expect("install the finish hold");
    }
}

/// `count` no-op jobs in one statement (`jobs::enqueue_many`), with the configured attempts.
async fn enqueue_noop_jobs(world: &World, count: usize) -> Vec<Uuid> {
    let attempts = world.context.settings.jobs.max_attempts;
    let batch: Vec<NewJob<BenchNoop>> = (0..count)
        .map(|_| NewJob::new(world.tenant_id, BenchNoop {}, attempts, None))
        .collect();
    let mut conn = world.pool.get().await.expect("connection");
    jobs::enqueue_many(&mut conn, &batch)
        .await
        .expect("enqueue")
        .into_iter()
        .map(|job| job.expect("a no-op job never conflicts").job_id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_slot_runs_the_next_job_while_the_last_finish_waits_for_its_commit() {
    let world = World::new().await;
    hold_every_finish_behind_the_lock(&world).await;
    let mut holder = world.pool.get().await.expect("connection");
    diesel::sql_query(format!("SELECT pg_advisory_lock({FINISH_LOCK})"))
        .execute(&mut holder)
        .await
        .expect("take the finish lock");

    let _worker = world.start_worker_with(|settings| {
        settings.worker.concurrency = 1;
        settings.worker.queues = vec!["bench-noop".to_owned()];
    });
    world.start_dispatcher();
    let ids = enqueue_noop_jobs(&world, 2).await;

    // With its one slot held until the first finish commits, the worker would never
    // claim the second job while the lock is held.
    for &job_id in &ids {
        let job = world.wait_for_job(job_id, JobStatus::Running).await;
        assert_eq!(job.attempts, 1, "claimed once");
    }

    diesel::sql_query(format!("SELECT pg_advisory_unlock({FINISH_LOCK})"))
        .execute(&mut holder)
        .await
        .expect("release the finish lock");
    for &job_id in &ids {
        let job = world.wait_for_job(job_id, JobStatus::Succeeded).await;
        assert_eq!(job.attempts, 1, "the held finish was written, not retried");
    }
}
