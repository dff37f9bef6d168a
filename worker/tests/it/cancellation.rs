//! Cancelling a running job stops it: the heartbeat reads the job's status and stops the
//! handler at its next step, without its effect and without a write-back.

use std::time::Duration;

use quire_shared::db::jobs;
use quire_shared::states::JobStatus;
use quire_shared::test_support::started_runs;

use crate::support::World;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_running_job_stops_at_its_next_heartbeat_without_its_effect() {
    let world = World::new().await;
    world.start_dispatcher();
    // A drain that waits a minute: only a handler that really stopped lets it end soon.
    let worker = world.start_worker_with(|settings| {
        settings.worker.drain_timeout_seconds = 60;
    });
    let job_id = world.running_long_job().await.id;

    let mut conn = world.pool.get().await.expect("connection");
    assert_eq!(
        jobs::cancel_jobs(&mut conn, &[job_id], "cancelled by the test")
            .await
            .expect("cancel"),
        1
    );
    // The lease is 3 s in tests, so a heartbeat comes within a second and stops the
    // handler; a handler still running would hold the one-minute drain.
    tokio::time::timeout(Duration::from_secs(5), worker.drain())
        .await
        .expect("the cancelled job was still running 5 s after its cancellation");
    let job = world.job(job_id).await;
    assert_eq!(job.status, JobStatus::Cancelled);
    assert_eq!(started_runs(&world.pool).await, 1);
}
