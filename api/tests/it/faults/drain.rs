//! e. SIGTERM with 1 s and 60 s jobs running and a 5 s drain deadline.

use std::time::Duration;

use quire_shared::db::jobs;
use quire_shared::jobs::FaultTest;
use quire_shared::states::JobStatus;
use quire_shared::test_support::{TestContext, eventually, started_runs};

use super::one_at_a_time;
use super::oracle::{assert_exactly_once, tally, wait_all_finished};
use super::stack::Stack;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_short_jobs_and_requeues_long_ones_at_the_deadline() {
    let _serial = one_at_a_time().await;
    let mut stack = Stack::new(TestContext::new().await).await;
    let worker_env = [
        ("QUIRE__WORKER__DRAIN_TIMEOUT_SECONDS", "5"),
        ("QUIRE__WORKER__CONCURRENCY", "8"),
    ];
    stack.spawn("api", &[]);
    stack.spawn("dispatcher-1", &[]);
    stack.spawn("worker-1", &worker_env);
    stack.wait_until_ready().await;
    let short = stack
        .enqueue(
            4,
            FaultTest {
                work_ms: 1_000,
                abort: false,
                transient_failures: 0,
                panic: false,
            },
            5,
        )
        .await;
    let long = stack
        .enqueue(
            4,
            FaultTest {
                work_ms: 60_000,
                abort: false,
                transient_failures: 0,
                panic: false,
            },
            5,
        )
        .await;
    eventually(Duration::from_secs(30), "all eight jobs run", || async {
        (started_runs(&stack.pool).await == 8).then_some(())
    })
    .await;

    let signalled = tokio::time::Instant::now();
    stack.terminate("worker-1");
    assert!(
        stack.wait_exit("worker-1", Duration::from_secs(15)).await,
        "the worker did not exit after SIGTERM"
    );
    let stopped_after = signalled.elapsed();
    // The drain waited for its deadline (long jobs were running) and no longer than a
    // second past it.
    assert!(
        stopped_after >= Duration::from_secs(5),
        "exited before the drain deadline: {stopped_after:?}"
    );
    assert!(
        stopped_after < Duration::from_secs(6),
        "exited {stopped_after:?} after SIGTERM"
    );

    let mut conn = stack.pool.get().await.expect("connection");
    for job in jobs::find_jobs(&mut conn, &short).await.expect("jobs") {
        assert_eq!(
            job.status,
            JobStatus::Succeeded,
            "a 1 s job did not finish in the drain"
        );
    }
    for job in jobs::find_jobs(&mut conn, &long).await.expect("jobs") {
        assert_eq!(
            job.status,
            JobStatus::Queued,
            "a 60 s job was not queued again"
        );
        assert_eq!(job.error_code.as_deref(), Some("worker_shutdown"));
    }

    stack.spawn("worker-1", &worker_env);
    let all: Vec<_> = short.iter().chain(&long).copied().collect();
    wait_all_finished(&stack.pool, &all, Duration::from_secs(120)).await;
    let tally = tally(&stack.pool, &all).await;
    println!("drain: stopped_after={stopped_after:?} {tally:?}");
    assert_exactly_once(&tally);
}
