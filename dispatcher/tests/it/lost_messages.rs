//! Lost-message recovery by the FIFO rule of DESIGN §5: a `QUEUED` job whose event was
//! published before the oldest message still in its list (or before `now() - grace`
//! when the list is empty) gets a new event; one whose message is still there does not.

use std::time::Duration;

use deadpool_redis::redis;
use diesel::QueryableByName;
use diesel::sql_types::{Timestamptz, Uuid as SqlUuid};
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

#[derive(QueryableByName)]
struct PublishedAt {
    #[diesel(sql_type = Timestamptz)]
    at: OffsetDateTime,
}

/// The database time an SQL expression names (`now() - interval '2 hours'`, or an
/// event's `published_at`): every time the rule compares comes from the database clock.
async fn db_time(world: &World, sql: &str, id: Uuid) -> OffsetDateTime {
    let mut conn = world.pool.get().await.expect("connection");
    // Called by path: the trait in scope would shadow `Vec::first` in this file.
    diesel_async::RunQueryDsl::get_result::<PublishedAt>(
        diesel::sql_query(sql).bind::<SqlUuid, _>(id),
        &mut conn,
    )
    .await
    .expect("a time")
    .at
}

/// Pushes the event's message onto its list, as the publisher does: stamped with the
/// time of its claim, which is never later than the event's `published_at`.
async fn push_message(world: &World, enqueued: Enqueued) {
    let at = db_time(
        world,
        "SELECT published_at AS at FROM outbox_events WHERE id = $1",
        enqueued.event_id,
    )
    .await;
    push_message_at(world, enqueued, at).await;
}

async fn push_message_at(world: &World, enqueued: Enqueued, pushed_at: OffsetDateTime) {
    let stored = {
        let mut conn = world.pool.get().await.expect("connection");
        outbox::event_message(&mut conn, enqueued.event_id)
            .await
            .expect("stored message")
    };
    let message: EventMessage = serde_json::from_value(stored).expect("an EventMessage");
    let wire = WireMessage::publish(message, Uuid::now_v7(), pushed_at);
    let raw = serde_json::to_string(&wire).expect("serialize");
    world.context.push_raw(JOB_TYPE, &raw).await;
}

/// Two hours ago by the database clock: before any backlog message below was pushed.
async fn two_hours_ago(world: &World) -> OffsetDateTime {
    db_time(
        world,
        "SELECT now() - interval '2 hours' AS at WHERE $1::uuid IS NOT NULL",
        Uuid::nil(),
    )
    .await
}

const BACKLOG: usize = 20;

/// `BACKLOG` queued jobs published an hour ago (longer than the grace), their messages
/// pushed after whatever `tail` put at the tail of the list, still waiting there.
async fn backlog_behind(world: &World, tail: impl AsyncFnOnce(&World)) -> Vec<Enqueued> {
    let mut jobs = Vec::with_capacity(BACKLOG);
    for _ in 0..BACKLOG {
        let enqueued = world.enqueue().await;
        published_ago(world, enqueued, "1 hour").await;
        jobs.push(enqueued);
    }
    tail(world).await;
    for enqueued in &jobs {
        push_message(world, *enqueued).await;
    }
    jobs
}

async fn list_contents(world: &World) -> Vec<String> {
    redis::cmd("LRANGE")
        .arg(world.list())
        .arg(0)
        .arg(-1)
        .query_async(&mut world.redis_command().await)
        .await
        .expect("lrange")
}

/// One pass with a grace shorter than the backlog's age: nothing may be announced again
/// while every backlog message still waits in the list.
async fn assert_pass_leaves_backlog_alone(world: &World, jobs: &[Enqueued]) {
    let before = list_contents(world).await;
    assert_eq!(before.len(), BACKLOG + 1);
    let reannounced = recovery(world, world.redis.clone(), Duration::from_secs(600))
        .run_once()
        .await
        .expect("lost-message recovery");
    assert_eq!(reannounced, Some(0));
    for enqueued in jobs {
        assert_eq!(world.events(enqueued.job_id).await.len(), 1, "no new event");
        assert_eq!(
            world.job(enqueued.job_id).await.current_event_id,
            Some(enqueued.event_id)
        );
    }
    assert_eq!(list_contents(world).await, before, "the list is unchanged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unparsable_message_at_the_tail_of_a_backlog_announces_nothing_again() {
    let world = World::new().await;
    let jobs = backlog_behind(&world, async |world: &World| {
        world.context.push_raw(JOB_TYPE, "{not a message").await;
    })
    .await;
    assert_pass_leaves_backlog_alone(&world, &jobs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_message_whose_event_was_deleted_announces_nothing_again() {
    let world = World::new().await;
    let jobs = backlog_behind(&world, async |world: &World| {
        // A message whose job, event and tenant a tenant wipe deleted meanwhile.
        let orphan = EventMessage::new(Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7(), JOB_TYPE);
        let wire = WireMessage::publish(orphan, Uuid::now_v7(), two_hours_ago(world).await);
        let raw = serde_json::to_string(&wire).expect("serialize");
        world.context.push_raw(JOB_TYPE, &raw).await;
    })
    .await;
    assert_pass_leaves_backlog_alone(&world, &jobs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_event_published_again_later_announces_nothing_again() {
    let world = World::new().await;
    let jobs = backlog_behind(&world, async |world: &World| {
        // The tail's message was pushed two hours ago, before the backlog; its event's
        // `published_at` is now (a later publication of the same event, a claim that
        // timed out after its push): only the push time says where the list stands.
        let tail = world.enqueue().await;
        published_ago(world, tail, "0 seconds").await;
        push_message_at(world, tail, two_hours_ago(world).await).await;
    })
    .await;
    assert_pass_leaves_backlog_alone(&world, &jobs).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_published_before_the_tail_was_pushed_is_announced_again() {
    let world = World::new().await;
    let (lost, waiting) = (world.enqueue().await, world.enqueue().await);
    // `lost` was published an hour ago and its message is gone; `waiting` was
    // published (and its message pushed) after it and still waits at the tail.
    published_ago(&world, lost, "1 hour").await;
    published_ago(&world, waiting, "30 minutes").await;
    push_message(&world, waiting).await;

    let reannounced = recovery(&world, world.redis.clone(), Duration::from_secs(600))
        .run_once()
        .await
        .expect("lost-message recovery");

    assert_eq!(reannounced, Some(1));
    assert_eq!(world.events(lost.job_id).await.len(), 2);
    assert_eq!(world.events(waiting.job_id).await.len(), 1);
}
