//! Deliveries the worker must survive: the same message several times runs its job once
//! (the claim matches the job's current event), and a malformed message is dropped
//! without stopping the worker.

use quire_shared::broker::{EventMessage, WireMessage};
use quire_shared::db::outbox;
use quire_shared::jobs::{BackgroundJob, FaultTest};
use quire_shared::states::JobStatus;
use quire_shared::test_support::started_runs;
use uuid::Uuid;

use crate::support::World;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_message_delivered_five_times_runs_the_job_once() {
    let world = World::new().await;
    let job_id = world.enqueue_fault_jobs(1, FaultTest::default()).await[0];
    let mut conn = world.pool.get().await.expect("connection");
    let event = outbox::job_events(&mut conn, job_id)
        .await
        .expect("events")
        .remove(0);

    // One message, pushed five times before any worker runs: five deliveries of it.
    let wire = WireMessage::publish(
        EventMessage::new(event.id, job_id, world.tenant_id, FaultTest::JOB_TYPE),
        Uuid::now_v7(),
        time::OffsetDateTime::now_utc(),
    );
    let raw = serde_json::to_string(&wire).expect("serialize");
    for _ in 0..5 {
        world.context.push_raw(FaultTest::JOB_TYPE, &raw).await;
    }

    // Two workers with several slots each race for the copies.
    let workers = [world.start_worker(), world.start_worker()];
    world.wait_for_job(job_id, JobStatus::Succeeded).await;
    world.context.wait_until_consumed(FaultTest::JOB_TYPE).await;
    for worker in workers {
        worker.drain().await;
    }

    let job = world.job(job_id).await;
    assert_eq!(job.status, JobStatus::Succeeded);
    assert_eq!(job.attempts, 1, "a duplicate delivery ran the job again");
    assert_eq!(started_runs(&world.pool).await, 1, "one handler run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_message_is_dropped_and_the_worker_keeps_working() {
    let world = World::new().await;
    // On the list the real job's message will follow, so the worker pops them first.
    for garbage in ["not json", "{\"v\":1}", "{\"v\":99,\"event_id\":1}"] {
        world.context.push_raw(FaultTest::JOB_TYPE, garbage).await;
    }
    world.start_dispatcher();
    let _worker = world.start_worker();
    let job_id = world.enqueue_fault_jobs(1, FaultTest::default()).await[0];
    let job = world.wait_for_job(job_id, JobStatus::Succeeded).await;
    assert_eq!(job.attempts, 1);
}
