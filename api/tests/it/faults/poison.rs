//! g. A handler that aborts its process on every attempt.

use std::time::Duration;

use quire_shared::db::jobs;
use quire_shared::jobs::FaultTest;
use quire_shared::states::JobStatus;
use quire_shared::test_support::TestContext;

use super::oracle::{assert_exactly_once, finished, tally, wait_all_finished};
use super::stack::Stack;
use super::{one_at_a_time, scale};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_pill_ends_failed_after_its_attempts_and_harms_nothing_else() {
    let _serial = one_at_a_time().await;
    let mut stack = Stack::new(TestContext::new().await).await;
    stack.start_all().await;
    let max_attempts = 3;
    let poison = stack
        .enqueue(
            1,
            FaultTest {
                work_ms: 0,
                abort: true,
                transient_failures: 0,
                panic: false,
            },
            max_attempts,
        )
        .await;
    let others = stack
        .enqueue(
            200 * scale(),
            FaultTest {
                work_ms: 50,
                abort: false,
                transient_failures: 0,
                panic: false,
            },
            25,
        )
        .await;
    let all: Vec<_> = poison.iter().chain(&others).copied().collect();

    // A supervisor, as systemd or Kubernetes would be: restart whatever died.
    let mut restarts = 0;
    let started = tokio::time::Instant::now();
    while finished(&stack.pool, &all).await < all.len() as i64
        && started.elapsed() < Duration::from_secs(120)
    {
        for name in super::stack::WORKERS {
            if !stack.is_running(name) {
                stack.spawn(name, &[]);
                restarts += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_all_finished(&stack.pool, &all, Duration::from_secs(60)).await;

    let mut conn = stack.pool.get().await.expect("connection");
    let pill = jobs::find_job(&mut conn, poison[0])
        .await
        .expect("query")
        .expect("job");
    println!(
        "poison: restarts={restarts} attempts={} {:?}",
        pill.attempts, pill.error_code
    );
    assert_eq!(pill.status, JobStatus::Failed);
    assert_eq!(pill.error_code.as_deref(), Some("worker_lost"));
    assert_eq!(pill.attempts, max_attempts);
    assert!(
        restarts >= max_attempts as usize,
        "each attempt killed a worker"
    );
    assert_exactly_once(&tally(&stack.pool, &others).await);
}
