//! Shutdown strands nothing: past the drain deadline, jobs still running are queued again
//! at once with a new event, not left `RUNNING` until their lease runs out — unless that
//! was their last attempt: then they end `FAILED`, so frequent deploys cannot loop a job
//! longer than the drain deadline for ever.

use std::time::Duration;

use quire_shared::jobs::FaultTest;
use quire_shared::states::JobStatus;
use quire_shared::test_support;

use crate::support::World;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_running_past_the_drain_deadline_are_queued_again_at_once() {
    let world = World::new().await;
    world.start_dispatcher();
    let worker = world.start_worker_with(|settings| {
        settings.worker.drain_timeout_seconds = 1;
        settings.worker.lease_seconds = 60;
    });
    let running = world.running_long_job().await;

    tokio::time::timeout(Duration::from_secs(5), worker.drain())
        .await
        .expect("the worker stopped within its drain deadline");
    let job = world.job(running.id).await;
    assert_eq!(
        job.status,
        JobStatus::Queued,
        "not left RUNNING for a 60 s lease"
    );
    assert_eq!(job.error_code.as_deref(), Some("worker_shutdown"));
    assert_ne!(job.current_event_id, running.current_event_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_stopped_by_shutdown_on_its_last_attempt_ends_failed() {
    let world = World::new().await;
    world.start_dispatcher();
    let worker = world.start_worker_with(|settings| {
        settings.worker.drain_timeout_seconds = 1;
        settings.worker.lease_seconds = 60;
    });
    let long = FaultTest {
        work_ms: 60_000,
        ..FaultTest::default()
    };
    // One attempt: the run the shutdown stops is its last.
    let job_id =
        test_support::enqueue_fault_jobs(&world.pool, world.tenant_id, 1, long, 1).await[0];
    let running = world.wait_for_job(job_id, JobStatus::Running).await;
    assert_eq!(running.attempts, running.max_attempts);

    tokio::time::timeout(Duration::from_secs(5), worker.drain())
        .await
        .expect("the worker stopped within its drain deadline");
    let job = world.job(job_id).await;
    assert_eq!(
        job.status,
        JobStatus::Failed,
        "not queued for a run it may not have"
    );
    assert_eq!(job.error_code.as_deref(), Some("worker_shutdown"));
    assert!(job.finished_at.is_some());
    assert!(job.lease_expires_at.is_none());
    assert_eq!(
        job.current_event_id, running.current_event_id,
        "no new event"
    );
}
