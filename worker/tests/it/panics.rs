//! A handler that panics fails that attempt with its own code, at once: its heartbeat
//! stops with it, so the lease is not renewed for a job nobody runs, and the worker goes
//! on serving other jobs in the freed slot.

use std::time::Duration;

use quire_shared::jobs::FaultTest;
use quire_shared::states::JobStatus;
use quire_shared::test_support::started_runs;

use crate::support::World;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_fails_its_job_at_once_and_the_worker_serves_on() {
    let world = World::new().await;
    world.start_dispatcher();
    // One slot: the job after the panic runs only if the panicking one gave its slot back.
    let worker = world.start_worker_with(|settings| {
        settings.worker.concurrency = 1;
        settings.worker.drain_timeout_seconds = 60;
    });
    let panicking = FaultTest {
        panic: true,
        ..FaultTest::default()
    };
    let job_id = world.enqueue_fault_jobs(1, panicking).await[0];

    // A panic is a bug, not bad luck: the attempt fails for good (docs/decisions.md).
    let job = world.wait_for_job(job_id, JobStatus::Failed).await;
    assert_eq!(job.error_code.as_deref(), Some("handler_panicked"));
    assert_eq!(job.attempts, 1, "a panic is not retried");
    assert!(job.lease_expires_at.is_none());
    assert!(job.finished_at.is_some());

    let next = world.enqueue_fault_jobs(1, FaultTest::default()).await[0];
    world.wait_for_job(next, JobStatus::Succeeded).await;
    assert_eq!(started_runs(&world.pool).await, 2);

    // Nothing of the panicking run is left holding the drain.
    tokio::time::timeout(Duration::from_secs(5), worker.drain())
        .await
        .expect("the worker drained at once");
    let job = world.job(job_id).await;
    assert_eq!(job.status, JobStatus::Failed, "no heartbeat revived it");
    assert!(job.heartbeat_at <= job.finished_at);
}
