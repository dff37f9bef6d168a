//! c. The dispatcher killed between the Redis push and marking the events published.

use std::time::Duration;

use quire_shared::jobs::FaultTest;
use quire_shared::test_support::TestContext;

use super::oracle::{assert_exactly_once, tally, wait_all_finished};
use super::stack::{DISPATCHERS, Stack, WORKERS};
use super::{one_at_a_time, scale};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatcher_dying_after_its_push_never_runs_an_effect_twice() {
    let _serial = one_at_a_time().await;
    let mut stack = Stack::new(TestContext::new().await).await;
    stack.spawn("api", &[]);
    for name in WORKERS {
        stack.spawn(name, &[]);
    }
    stack.wait_until_ready().await;
    let crashes_wanted = 100 * scale();
    let ids = stack
        .enqueue(
            5 * crashes_wanted,
            FaultTest {
                work_ms: 10,
                abort: false,
                transient_failures: 0,
                panic: false,
            },
            25,
        )
        .await;

    // Small batches and a one-second claim timeout: every crash strands a batch that was
    // pushed but never marked, which comes back and is pushed again.
    let fail_point = [
        ("QUIRE_FAILPOINT_ABORT_AFTER_PUSH", "1"),
        ("QUIRE__DISPATCHER__BATCH_SIZE", "5"),
        ("QUIRE__DISPATCHER__CLAIM_TIMEOUT_SECONDS", "1"),
    ];
    let mut crashes = 0;
    while crashes < crashes_wanted {
        stack.spawn("dispatcher-1", &fail_point);
        assert!(
            stack
                .wait_exit("dispatcher-1", Duration::from_secs(20))
                .await,
            "a dispatcher with the fail-point did not reach it"
        );
        crashes += 1;
    }
    for name in DISPATCHERS {
        stack.spawn(name, &[("QUIRE__DISPATCHER__CLAIM_TIMEOUT_SECONDS", "1")]);
    }
    wait_all_finished(&stack.pool, &ids, Duration::from_secs(120)).await;
    let tally = tally(&stack.pool, &ids).await;
    println!("dispatcher_crash: crashes={crashes} {tally:?}");
    assert_exactly_once(&tally);
}
