//! a. `kill -9` a random worker every ~2 s while 2,000 jobs run.

use std::time::Duration;

use quire_shared::jobs::FaultTest;
use quire_shared::test_support::TestContext;

use super::oracle::{assert_exactly_once, finished, tally, wait_all_finished};
use super::stack::{Stack, WORKERS};
use super::{one_at_a_time, scale};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_workers_mid_run_loses_and_duplicates_nothing() {
    let _serial = one_at_a_time().await;
    let mut stack = Stack::new(TestContext::new().await).await;
    stack.start_all().await;
    let lease = Duration::from_secs(stack.context.settings.worker.lease_seconds);
    let tick = Duration::from_millis(stack.context.settings.dispatcher.rescuer_interval_ms);
    let count = 2_000 * scale();
    let ids = stack
        .enqueue(
            count,
            FaultTest {
                work_ms: 100,
                abort: false,
                transient_failures: 0,
                panic: false,
            },
            25,
        )
        .await;

    // The fault schedule: one SIGKILL every ~2 s while work remains.
    let mut kills = 0;
    let started = tokio::time::Instant::now();
    let mut last_kill = started;
    let give_up = Duration::from_secs(180) * scale() as u32;
    while finished(&stack.pool, &ids).await < count as i64 && started.elapsed() < give_up {
        stack.assert_alive();
        tokio::time::sleep(Duration::from_secs(2)).await;
        if finished(&stack.pool, &ids).await >= count as i64 {
            break;
        }
        let victim = WORKERS[rand_index(WORKERS.len())];
        stack.kill(victim).await;
        stack.spawn(victim, &[]);
        kills += 1;
        last_kill = tokio::time::Instant::now();
    }
    // Whatever the last kill orphaned is rescued after its lease, then runs.
    wait_all_finished(&stack.pool, &ids, lease + tick + Duration::from_secs(30)).await;
    let settled = last_kill.elapsed();
    let tally = tally(&stack.pool, &ids).await;
    println!("kill_workers: kills={kills} settled_after_last_kill={settled:?} {tally:?}");
    assert!(kills >= 2, "the run ended before the faults: {kills} kills");
    // The last kill's orphans wait at most a lease plus a rescuer interval to be
    // rescued; the rest is the little work the last two seconds left.
    assert!(
        settled < lease + tick + Duration::from_secs(5),
        "jobs settled {settled:?} after the last kill"
    );
    assert_exactly_once(&tally);
    assert!(tally.starts >= tally.enqueued as i64);
}

fn rand_index(len: usize) -> usize {
    (uuid::Uuid::new_v4().as_u128() % len as u128) as usize
}
