//! b. Redis restarted twice mid-run, once after FLUSHALL.

use std::time::Duration;

use deadpool_redis::redis;
use quire_shared::jobs::FaultTest;
use quire_shared::test_support::{RedisServer, TestContext, eventually};

use super::oracle::{assert_exactly_once, finished, tally, wait_all_finished};
use super::stack::Stack;
use super::{one_at_a_time, scale};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restarting_empty_mid_run_loses_nothing() {
    let _serial = one_at_a_time().await;
    let mut redis_server = RedisServer::start().await;
    let mut stack = Stack::new(TestContext::with_redis_url(&redis_server.url()).await).await;
    stack.start_all().await;
    let count = 1_000 * scale();
    let ids = stack
        .enqueue(
            count,
            FaultTest {
                work_ms: 50,
                abort: false,
                transient_failures: 0,
                panic: false,
            },
            25,
        )
        .await;

    for (round, threshold) in [(1, count / 4), (2, count / 2)] {
        eventually(Duration::from_secs(60), "the run progresses", || async {
            (finished(&stack.pool, &ids).await >= threshold as i64).then_some(())
        })
        .await;
        if round == 2 {
            let client = redis::Client::open(redis_server.url()).expect("client");
            let mut conn = client
                .get_multiplexed_async_connection()
                .await
                .expect("redis");
            let _: String = redis::cmd("FLUSHALL")
                .query_async(&mut conn)
                .await
                .expect("flushall");
        }
        // Killed and started again empty: every queued message is gone.
        redis_server.restart().await;
    }

    wait_all_finished(&stack.pool, &ids, Duration::from_secs(120)).await;
    let tally = tally(&stack.pool, &ids).await;
    println!("redis_restarts: {tally:?}");
    assert_exactly_once(&tally);
}
