//! Shutdown strands nothing: past the drain deadline, jobs still running are queued again
//! at once with a new event, not left `RUNNING` until their lease runs out.

use std::time::Duration;

use quire_shared::states::JobStatus;

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
