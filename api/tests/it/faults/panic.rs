//! i. A handler that panics, among ordinary jobs, in the real worker binaries.

use std::time::Duration;

use quire_shared::db::jobs;
use quire_shared::jobs::FaultTest;
use quire_shared::states::JobStatus;
use quire_shared::test_support::TestContext;

use super::oracle::{assert_exactly_once, tally, wait_all_finished};
use super::stack::Stack;
use super::{one_at_a_time, scale};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_job_fails_within_its_lease_and_its_worker_serves_the_others() {
    let _serial = one_at_a_time().await;
    let mut stack = Stack::new(TestContext::new().await).await;
    stack.start_all().await;
    let lease = Duration::from_secs(stack.context.settings.worker.lease_seconds);
    let pill = stack
        .enqueue(
            1,
            FaultTest {
                panic: true,
                ..FaultTest::default()
            },
            3,
        )
        .await;
    let others = stack
        .enqueue(
            200 * scale(),
            FaultTest {
                work_ms: 50,
                ..FaultTest::default()
            },
            25,
        )
        .await;
    let all: Vec<_> = pill.iter().chain(&others).copied().collect();

    // A worker that kept renewing the panicked job's lease would hold it RUNNING until
    // the process exits: this would time out.
    wait_all_finished(&stack.pool, &all, Duration::from_secs(60)).await;

    let mut conn = stack.pool.get().await.expect("connection");
    let job = jobs::find_job(&mut conn, pill[0])
        .await
        .expect("query")
        .expect("job");
    assert_eq!(job.status, JobStatus::Failed);
    assert_eq!(job.error_code.as_deref(), Some("handler_panicked"));
    assert_eq!(job.attempts, 1, "a panic is not retried");
    let held = job.finished_at.expect("finished") - job.started_at.expect("started");
    assert!(
        held < lease,
        "failed at once ({held}), not after its lease ran out"
    );
    // The panic unwound one slot's task, never its process.
    stack.assert_alive();
    assert_exactly_once(&tally(&stack.pool, &others).await);
}
