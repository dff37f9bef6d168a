//! Lost-message recovery by the FIFO rule of DESIGN §5: a `QUEUED` job whose event was
//! published before the oldest message still in its list (or before `now() - grace`
//! when the list is empty) gets a new event; one whose message is still there does not.

use std::time::Duration;

use deadpool_redis::redis;
use quire_dispatcher::maintenance::{LostMessages, Task};
use quire_shared::broker::{EventMessage, WireMessage};
use quire_shared::config::RedisSettings;
use quire_shared::db::jobs::Enqueued;
use quire_shared::db::outbox;
use quire_shared::redis_client::RedisPool;
use quire_shared::secret::Secret;
use quire_shared::states::{EventStatus, JobStatus};
use quire_shared::test_support::{eventually, free_port};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::support::{DEADLINE, JOB_TYPE, World};

/// Waits until the dispatcher published the job's only event.
async fn published(world: &World, enqueued: Enqueued) {
    eventually(DEADLINE, "the event is published", || async {
        let events = world.events(enqueued.job_id).await;
        (events.first()?.status == EventStatus::Published).then_some(())
    })
    .await;
}

fn recovery(world: &World, redis: RedisPool, grace: Duration) -> LostMessages {
    LostMessages::new(
        world.pool.clone(),
        redis,
        world.context.namespace.clone(),
        grace,
        100,
    )
}

/// Marks the job's event published `ago` (an SQL interval), as a dispatcher would have,
/// with no message in any list: no dispatcher runs beside the pass under test.
async fn published_ago(world: &World, enqueued: Enqueued, ago: &str) {
    world
        .execute(
            &format!(
                "UPDATE outbox_events SET status = 'PUBLISHED', \
                 published_at = now() - interval '{ago}' WHERE id = $1"
            ),
            enqueued.event_id,
        )
        .await;
}

/// Pushes the event's message onto its list, as the publisher does.
async fn push_message(world: &World, enqueued: Enqueued) {
    let stored = {
        let mut conn = world.pool.get().await.expect("connection");
        outbox::event_message(&mut conn, enqueued.event_id)
            .await
            .expect("stored message")
    };
    let message: EventMessage = serde_json::from_value(stored).expect("an EventMessage");
    let wire = WireMessage::publish(message, Uuid::now_v7(), OffsetDateTime::now_utc());
    let raw = serde_json::to_string(&wire).expect("serialize");
    world.context.push_raw(JOB_TYPE, &raw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_message_that_redis_loses_is_announced_again() {
    let world = World::new().await;
    world.start_dispatcher();
    let enqueued = world.enqueue().await;
    published(&world, enqueued).await;

    // Redis loses the list (a restart without persistence, an operator's DEL...).
    let _: i64 = redis::cmd("DEL")
        .arg(world.list())
        .query_async(&mut world.redis_command().await)
        .await
        .expect("del");

    let events = eventually(DEADLINE, "a new event is published", || async {
        let events = world.events(enqueued.job_id).await;
        (events.get(1)?.status == EventStatus::Published).then_some(events)
    })
    .await;
    assert_eq!(events.len(), 2);
    let job = world.job(enqueued.job_id).await;
    assert_eq!(job.status, JobStatus::Queued);
    assert_eq!(job.current_event_id, Some(events[1].id));
    assert_eq!(
        world.oldest_event_id().await,
        Some(events[1].id),
        "the list announces the new event"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_still_in_its_list_is_not_announced_again_however_old() {
    let world = World::new().await;
    let enqueued = world.enqueue().await;
    published_ago(&world, enqueued, "1 hour").await;
    push_message(&world, enqueued).await;
    assert_eq!(world.oldest_event_id().await, Some(enqueued.event_id));

    let reannounced = recovery(&world, world.redis.clone(), Duration::ZERO)
        .run_once()
        .await
        .expect("lost-message recovery");

    assert_eq!(reannounced, Some(0));
    assert_eq!(world.events(enqueued.job_id).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_list_announces_again_only_jobs_published_before_the_grace() {
    let world = World::new().await;
    let (old, recent) = (world.enqueue().await, world.enqueue().await);
    published_ago(&world, old, "1 hour").await;
    published_ago(&world, recent, "1 second").await;

    let reannounced = recovery(&world, world.redis.clone(), Duration::from_secs(600))
        .run_once()
        .await
        .expect("lost-message recovery");

    assert_eq!(reannounced, Some(1));
    let events = world.events(old.job_id).await;
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].status, EventStatus::Pending, "due now");
    assert_eq!(
        world.job(old.job_id).await.current_event_id,
        Some(events[1].id)
    );
    assert_eq!(
        world.events(recent.job_id).await.len(),
        1,
        "a message published within the grace may still be on its way"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_redis_a_pass_fails_and_announces_nothing() {
    let world = World::new().await;
    let enqueued = world.enqueue().await;
    published_ago(&world, enqueued, "1 hour").await;
    // Nothing listens on this port: a Redis that is down.
    let unreachable = RedisPool::build(&RedisSettings {
        url: Secret::new(format!("redis://127.0.0.1:{}", free_port())),
        ..world.context.settings.redis.clone()
    })
    .expect("redis pool");

    let outcome = recovery(&world, unreachable, Duration::ZERO)
        .run_once()
        .await;

    assert!(outcome.is_err(), "{outcome:?}");
    assert_eq!(world.events(enqueued.job_id).await.len(), 1);
}
