//! The dispatcher through a Redis outage: a failed push puts its events back with a
//! safe error and they are published once Redis is back; meanwhile the maintenance
//! services that need no Redis go on.

use std::time::Duration;

use quire_shared::states::{EventStatus, JobStatus};
use quire_shared::test_support::{RedisServer, TestContext, eventually};

use crate::support::{DEADLINE, World};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_while_redis_is_down_is_put_back_and_published_once_redis_is_back() {
    let mut redis = RedisServer::start().await;
    let world = World::in_context(TestContext::with_redis_url(&redis.url()).await).await;
    world.start_dispatcher();

    redis.kill().await;
    let enqueued = world.enqueue().await;

    // The dispatcher tried, failed, and put the event back: nothing is lost or dropped.
    let event = eventually(DEADLINE, "a failed publish is recorded", || async {
        let event = world.events(enqueued.job_id).await.into_iter().next()?;
        (event.publish_attempts >= 1 && event.status == EventStatus::Pending).then_some(event)
    })
    .await;
    let error = event.last_error.expect("a safe error is recorded");
    assert!(
        !error.contains("redis://") && !error.contains("127.0.0.1"),
        "{error}"
    );
    assert_eq!(world.job(enqueued.job_id).await.status, JobStatus::Queued);

    // Nobody touches anything: Redis comes back, empty, and the event is published.
    redis.restart().await;
    eventually(DEADLINE, "the event is published", || async {
        let event = world.events(enqueued.job_id).await.into_iter().next()?;
        (event.status == EventStatus::Published).then_some(())
    })
    .await;
    assert_eq!(world.oldest_event_id().await, Some(enqueued.event_id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_redis_is_down_the_rescuer_still_rescues() {
    let mut redis = RedisServer::start().await;
    let world = World::in_context(TestContext::with_redis_url(&redis.url()).await).await;
    let enqueued = world.enqueue().await;
    world.claim(enqueued, Duration::from_secs(60)).await;
    world.expire_lease(enqueued.job_id).await;
    redis.kill().await;

    // Lost-message recovery fails at every interval without Redis; the rescuer does not.
    world.start_dispatcher();

    let job = world.wait_for_job(enqueued.job_id, JobStatus::Queued).await;
    assert_eq!(job.error_code.as_deref(), Some("worker_lost"));
    assert_eq!(world.events(enqueued.job_id).await.len(), 2);
}
