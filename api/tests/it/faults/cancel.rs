//! f. 200 queued and 20 running jobs cancelled.

use std::time::Duration;

use deadpool_redis::redis;
use quire_shared::broker::queue_key;
use quire_shared::db::jobs;
use quire_shared::jobs::FaultTest;
use quire_shared::test_support::{TestContext, eventually, started_runs};

use super::one_at_a_time;
use super::oracle::tally;
use super::stack::Stack;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_jobs_never_start_and_running_ones_stop() {
    let _serial = one_at_a_time().await;
    let mut stack = Stack::new(TestContext::new().await).await;
    stack.spawn("api", &[]);
    stack.spawn("dispatcher-1", &[]);
    stack.spawn("worker-1", &[("QUIRE__WORKER__CONCURRENCY", "20")]);
    stack.wait_until_ready().await;
    let running = stack
        .enqueue(
            20,
            FaultTest {
                work_ms: 120_000,
                abort: false,
                transient_failures: 0,
                panic: false,
            },
            5,
        )
        .await;
    eventually(Duration::from_secs(30), "twenty jobs run", || async {
        (started_runs(&stack.pool).await == 20).then_some(())
    })
    .await;
    // Every slot is busy: these wait, published, in Redis.
    let queued = stack.enqueue(200, FaultTest::default(), 5).await;
    let key = queue_key(&stack.context.namespace, "fault-test");
    let client = redis::Client::open(stack.context.settings.redis.url.expose()).expect("client");
    let redis_conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let list_length = || {
        let mut conn = redis_conn.clone();
        let key = key.clone();
        async move {
            redis::cmd("LLEN")
                .arg(&key)
                .query_async::<i64>(&mut conn)
                .await
                .ok()
        }
    };
    eventually(
        Duration::from_secs(30),
        "the queued jobs are published",
        || async { (list_length().await? == 200).then_some(()) },
    )
    .await;

    let all: Vec<_> = running.iter().chain(&queued).copied().collect();
    let mut conn = stack.pool.get().await.expect("connection");
    let cancelled = jobs::cancel_jobs(&mut conn, &all, "cancelled by the fault suite")
        .await
        .expect("cancel");
    assert_eq!(cancelled, 220);

    // Running handlers stop at their next heartbeat, which frees their slots; the worker
    // then pops the 200 messages, and each claims nothing.
    eventually(
        Duration::from_secs(5),
        "the running jobs stop and free their slots",
        || async { (list_length().await? == 0).then_some(()) },
    )
    .await;
    let tally = tally(&stack.pool, &all).await;
    println!("cancel: {tally:?}");
    assert_eq!(tally.cancelled, 220, "{tally:?}");
    assert_eq!(
        tally.starts, 20,
        "a cancelled queued job started: {tally:?}"
    );
    assert_eq!(tally.succeeded, 0);
    assert_eq!(
        tally.unexpected, 0,
        "a cancelled job left an effect: {tally:?}"
    );
}
