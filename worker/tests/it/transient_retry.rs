//! A transient failure is retried through a new outbox event due later (the outbox is
//! the scheduler), until the job's attempts run out.

use quire_shared::db::outbox;
use quire_shared::jobs::FaultTest;
use quire_shared::states::JobStatus;

use crate::support::World;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transient_failure_is_retried_through_a_new_delayed_event() {
    let world = World::new().await;
    world.start_dispatcher();
    let _worker = world.start_worker();
    let flaky = FaultTest {
        work_ms: 0,
        abort: false,
        transient_failures: 2,
        panic: false,
    };
    let job_id = world.enqueue_fault_jobs(1, flaky).await[0];
    let job = world.wait_for_job(job_id, JobStatus::Succeeded).await;
    assert_eq!(job.attempts, 3);
    let mut conn = world.pool.get().await.expect("connection");
    let events = outbox::job_events(&mut conn, job_id).await.expect("events");
    assert_eq!(events.len(), 3, "each retry is a new outbox event");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_failures_end_failed_with_their_code_when_attempts_run_out() {
    let world = World::new().await;
    world.start_dispatcher();
    let _worker = world.start_worker();
    let hopeless = FaultTest {
        work_ms: 0,
        abort: false,
        transient_failures: 100,
        panic: false,
    };
    // The tenant's budget comes from settings: the test profile keeps the default.
    let job_id = world.enqueue_fault_jobs(1, hopeless).await[0];
    let job = world.wait_for_job(job_id, JobStatus::Failed).await;
    assert_eq!(job.attempts, job.max_attempts);
    assert_eq!(job.error_code.as_deref(), Some("fault_transient"));
}
