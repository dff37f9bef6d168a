use deadpool_redis::redis;
use quire_shared::broker::queue_key;
use quire_shared::db::outbox;
use quire_shared::states::{EventStatus, JobStatus};
use quire_shared::test_support::eventually;

use crate::helpers::{DEADLINE, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_message_that_redis_loses_is_announced_again() {
    let app = TestApp::spawn().await;
    app.start_dispatcher();
    let (_, job_id) = app.upload(b"a message that will vanish").await;
    eventually(DEADLINE, "the event is published", || async {
        let mut conn = app.pool.get().await.ok()?;
        let events = outbox::job_events(&mut conn, job_id).await.ok()?;
        (events.first()?.status == EventStatus::Published).then_some(())
    })
    .await;

    // Redis loses the list (a restart without persistence, an operator's DEL...).
    let client = redis::Client::open(app.context.settings.redis.url.expose()).expect("client");
    let mut redis = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let key = queue_key(&app.context.namespace, "analyze-document");
    let _: i64 = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut redis)
        .await
        .expect("del");

    let _worker = app.start_worker();
    let job = app.wait_for_job(job_id, JobStatus::Succeeded).await;
    assert_eq!(job.attempts, 1, "the lost message never ran the job");
    let mut conn = app.pool.get().await.expect("connection");
    assert_eq!(
        outbox::job_events(&mut conn, job_id)
            .await
            .expect("events")
            .len(),
        2
    );
}
