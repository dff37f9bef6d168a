use std::time::Duration;

use quire_shared::jobs::FaultTest;
use quire_shared::states::JobStatus;

use crate::helpers::TestApp;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_running_past_the_drain_deadline_are_queued_again_at_once() {
    let app = TestApp::spawn().await;
    app.create_oracle_tables().await;
    app.start_dispatcher();
    let worker = app.start_worker_with(app.settings_with(|settings| {
        settings.worker.drain_timeout_seconds = 1;
        settings.worker.lease_seconds = 60;
    }));
    let long = FaultTest {
        work_ms: 60_000,
        abort: false,
        transient_failures: 0,
    };
    let job_id = app.enqueue_fault_jobs(1, long).await[0];
    let running = app.wait_for_job(job_id, JobStatus::Running).await;

    tokio::time::timeout(Duration::from_secs(5), worker.drain())
        .await
        .expect("the worker stopped within its drain deadline");
    let job = app.job(job_id).await;
    assert_eq!(
        job.status,
        JobStatus::Queued,
        "not left RUNNING for a 60 s lease"
    );
    assert_eq!(job.error_code.as_deref(), Some("worker_shutdown"));
    assert_ne!(job.current_event_id, running.current_event_id);
}
