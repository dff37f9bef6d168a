//! The publisher as the scheduler, with the test as the only worker: it pops and claims
//! by hand, so what is published, and when, is visible message by message. A tenant at
//! its running cap gets nothing more until a job finishes; racing dispatchers keep the
//! per-queue bound and never publish an event twice.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::redis;
use diesel::sql_types::{BigInt, Uuid as SqlUuid};
use quire_dispatcher::Publisher;
use quire_shared::broker::WireMessage;
use quire_shared::db::jobs::{self, Enqueued, NewJob};
use quire_shared::db::outbox::{self, Published};
use quire_shared::db::workers::{self, WorkerReport};
use quire_shared::db::{DbError, PooledConnection, scheduler};
use quire_shared::jobs::{AnalyzeDocument, BackgroundJob, BenchNoop, VerifyDocument};
use quire_shared::scheduling::Limits;
use quire_shared::states::{EventStatus, JobStatus};
use quire_shared::test_support::{eventually, within};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::support::{DEADLINE, World};

const LEASE: Duration = Duration::from_secs(60);

async fn enqueue_for(world: &World, tenant_id: Uuid) -> Enqueued {
    let job = NewJob::new(tenant_id, BenchNoop {}, 3, None);
    let mut conn = world.pool.get().await.expect("connection");
    jobs::enqueue(&mut conn, &job)
        .await
        .expect("enqueue")
        .expect("enqueued")
}

/// How many of the tenant's events are `PUBLISHED`.
async fn published_of(world: &World, tenant_id: Uuid) -> i64 {
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = BigInt)]
        count: i64,
    }
    let mut conn = world.pool.get().await.expect("connection");
    let query = diesel::sql_query(
        "SELECT count(*) AS count FROM outbox_events WHERE tenant_id = $1 AND status = 'PUBLISHED'",
    )
    .bind::<SqlUuid, _>(tenant_id);
    diesel_async::RunQueryDsl::get_result::<Count>(query, &mut conn)
        .await
        .expect("count")
        .count
}

async fn wait_published(world: &World, enqueued: Enqueued) {
    eventually(DEADLINE, "the event is published", || async {
        (world.events(enqueued.job_id).await[0].status == EventStatus::Published).then_some(())
    })
    .await;
}

/// Pops every message in the test list now (none: an empty vector).
async fn pop_all(world: &World) -> Vec<WireMessage> {
    let popped: Option<Vec<String>> = redis::cmd("RPOP")
        .arg(world.list())
        .arg(10_000)
        .query_async(&mut world.redis_command().await)
        .await
        .expect("rpop");
    popped
        .unwrap_or_default()
        .iter()
        .map(|text| serde_json::from_str(text).expect("a wire message"))
        .collect()
}

/// Waits for published messages, then claims and finishes each as a worker would, after
/// checking that no event in them was published before (`seen` holds those so far).
async fn run_published(world: &World, seen: &mut HashSet<Uuid>) {
    let popped = eventually(DEADLINE, "messages are published", || async {
        let popped = pop_all(world).await;
        (!popped.is_empty()).then_some(popped)
    })
    .await;
    let mut conn = world.pool.get().await.expect("connection");
    for message in &popped {
        assert!(
            seen.insert(message.event_id),
            "event {} was published twice",
            message.event_id
        );
        let job = jobs::claim_job(
            &mut conn,
            message.job_id,
            message.event_id,
            "worker-test",
            message.task_id,
            LEASE,
        )
        .await
        .expect("claim")
        .expect("each message claims its job");
        let fence = job.fence().expect("fence");
        assert!(
            jobs::mark_succeeded(&mut conn, &fence)
                .await
                .expect("finish")
        );
    }
}

async fn list_length(world: &World) -> i64 {
    redis::cmd("LLEN")
        .arg(world.list())
        .query_async(&mut world.redis_command().await)
        .await
        .expect("llen")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_at_its_running_cap_gets_nothing_more_published_until_a_job_finishes() {
    let world = World::new().await;
    let tenant_a = world.tenant_id;
    let (tenant_b, _) = world
        .context
        .provisioned_tenant("tenant-b", Uuid::now_v7())
        .await;
    world
        .execute(
            "UPDATE tenants SET max_running_jobs = 2 WHERE id = $1",
            tenant_a,
        )
        .await;
    for _ in 0..10 {
        world.enqueue().await;
    }
    world.start_dispatcher();
    eventually(DEADLINE, "two of A's events are published", || async {
        (published_of(&world, tenant_a).await == 2).then_some(())
    })
    .await;

    // B's publication proves a round ran since; A stayed at its cap of two in flight.
    wait_published(&world, enqueue_for(&world, tenant_b).await).await;
    assert_eq!(published_of(&world, tenant_a).await, 2);

    // A claimed job still counts against the cap: running plus in flight.
    let popped = pop_all(&world).await;
    let a_message = popped
        .iter()
        .find(|message| message.tenant_id == tenant_a)
        .expect("a message of A");
    let job = world
        .claim(
            Enqueued {
                job_id: a_message.job_id,
                event_id: a_message.event_id,
            },
            LEASE,
        )
        .await;
    wait_published(&world, enqueue_for(&world, tenant_b).await).await;
    assert_eq!(
        published_of(&world, tenant_a).await,
        2,
        "one running and one in flight is the cap"
    );

    // Its finish frees a place (and wakes the dispatcher): one more of A's is published.
    let mut conn = world.pool.get().await.expect("connection");
    let fence = job.fence().expect("a claimed job has a fence");
    assert!(
        jobs::mark_succeeded(&mut conn, &fence)
            .await
            .expect("finish")
    );
    eventually(DEADLINE, "a third event of A is published", || async {
        (published_of(&world, tenant_a).await == 3).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_dispatchers_keep_the_in_flight_bound_and_never_publish_an_event_twice() {
    const BOUND: i64 = 20;
    const JOBS: usize = 300;
    let world = World::new().await;
    let mut enqueued = Vec::with_capacity(JOBS);
    for _ in 0..JOBS {
        enqueued.push(world.enqueue().await);
    }
    for _ in 0..3 {
        world.start_dispatcher_with(|settings| {
            settings.scheduling.in_flight_per_queue = BOUND;
            // Several rounds per refill, so the dispatchers interleave.
            settings.dispatcher.batch_size = 7;
        });
    }

    let mut seen = HashSet::new();
    while seen.len() < JOBS {
        let length = list_length(&world).await;
        assert!(
            length <= BOUND,
            "{length} messages wait in Redis, more than the bound of {BOUND}"
        );
        run_published(&world, &mut seen).await;
    }
    for job in enqueued {
        let events = world.events(job.job_id).await;
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].status, EventStatus::Published);
        assert_eq!(events[0].publish_attempts, 0);
    }
}

/// The live slots of a queue bound its messages in flight (with `in_flight_per_queue`),
/// so that every free slot finds a message. An analysis queue counts only the workers'
/// analysis slots: a worker pops no more analyses than those, and more messages would
/// only wait in Redis ahead of another tenant's. A worker that reports none (one of
/// before) counts all its slots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_analysis_queue_counts_only_the_live_workers_analysis_slots() {
    let world = World::new().await;
    let mut conn = world.pool.get().await.expect("connection");
    let queues = vec![
        AnalyzeDocument::JOB_TYPE.to_owned(),
        VerifyDocument::JOB_TYPE.to_owned(),
    ];
    for (id, analysis_slots) in [("worker-now", 3), ("worker-before", 16)] {
        let report = WorkerReport {
            id,
            host: "test-host",
            pid: 1,
            slots: 16,
            busy: 0,
            queues: &queues,
            analysis_slots,
        };
        workers::report(&mut conn, &report).await.expect("report");
    }
    let before =
        diesel::sql_query("UPDATE workers SET analysis_slots = NULL WHERE id = 'worker-before'");
    diesel_async::RunQueryDsl::execute(before, &mut conn)
        .await
        .expect("a worker of before reports no analysis slots");

    let (limits, default_cap) = round_limits(&world);
    let state = scheduler::read_state(&mut conn, &limits, default_cap)
        .await
        .expect("the round's state");
    assert_eq!(state.slots.get(AnalyzeDocument::JOB_TYPE), Some(&(3 + 16)));
    assert_eq!(state.slots.get(VerifyDocument::JOB_TYPE), Some(&(16 + 16)));
}

/// The limits and default cap a dispatcher on the test's settings plans with.
fn round_limits(world: &World) -> (Limits, i64) {
    let settings = &world.context.settings;
    (
        Limits::from_settings(settings),
        settings.scheduling.max_running_per_tenant,
    )
}

/// A round as the publisher opens one, left open on the returned connection (holding
/// the scheduling lock and its claims until it commits or rolls back).
async fn open_round(world: &World) -> (PooledConnection, scheduler::RoundClaims) {
    let (limits, default_cap) = round_limits(world);
    let mut round = world.pool.get().await.expect("connection");
    let claimed = scheduler::open_round(&mut round, "dispatcher-test", &limits, default_cap)
        .await
        .expect("a round");
    (round, claimed)
}

/// Whether another session could take the scheduling lock now (and would, for the
/// rest of its own statement only).
async fn scheduler_lock_is_free(world: &World) -> bool {
    #[derive(diesel::QueryableByName)]
    struct Free {
        #[diesel(sql_type = diesel::sql_types::Bool)]
        free: bool,
    }
    let mut conn = world.pool.get().await.expect("connection");
    let query = diesel::sql_query("SELECT pg_try_advisory_xact_lock($1) AS free")
        .bind::<BigInt, _>(scheduler::SCHEDULER_LOCK);
    diesel_async::RunQueryDsl::get_result::<Free>(query, &mut conn)
        .await
        .expect("try the lock")
        .free
}

/// The publisher pushes a round's messages while the round's commit is on its way
/// (docs/decisions.md, "The round commits while its messages travel"), so a worker may
/// claim a job before the claim of its event has committed. That claim needs the job
/// row alone; the round's claims and the scheduling lock stay held, unseen by anyone
/// else, until the commit; the mark that follows finds its claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_claims_a_message_whose_round_has_not_committed_yet() {
    let world = World::new().await;
    let enqueued = enqueue_for(&world, world.tenant_id).await;
    let (mut round, claimed) = open_round(&world).await;
    let [event] = claimed.events.as_slice() else {
        panic!(
            "the round claimed {} events, not the one due",
            claimed.events.len()
        );
    };
    assert_eq!(event.id, enqueued.event_id);
    assert_eq!(
        world.events(enqueued.job_id).await[0].status,
        EventStatus::Pending,
        "a claim is seen only once its round commits"
    );
    assert!(
        !scheduler_lock_is_free(&world).await,
        "an open round holds the scheduling lock"
    );

    // The message arrived first: the worker claims by the job's current event.
    let task_id = Uuid::now_v7();
    let mut worker = world.pool.get().await.expect("connection");
    let job = jobs::claim_job(
        &mut worker,
        enqueued.job_id,
        enqueued.event_id,
        "worker-test",
        task_id,
        LEASE,
    )
    .await
    .expect("claim")
    .expect("the job is claimed before its publication committed");
    assert_eq!(job.last_task_id, Some(task_id));

    scheduler::commit_round(&mut round).await.expect("commit");
    assert!(
        scheduler_lock_is_free(&world).await,
        "the commit releases the scheduling lock"
    );
    let published = [Published {
        event_id: event.id,
        task_id,
    }];
    let marked = outbox::mark_published(&mut round, "dispatcher-test", &published)
        .await
        .expect("mark");
    assert_eq!(marked, 1, "the mark finds the committed claim");
    assert_eq!(
        world.events(enqueued.job_id).await[0].status,
        EventStatus::Published
    );
    assert_eq!(world.job(enqueued.job_id).await.status, JobStatus::Running);
}

/// Running and in-flight jobs of the tenant, as a round reads them (summed over queues).
async fn occupancy_of(world: &World, tenant_id: Uuid) -> (i64, i64) {
    let (limits, default_cap) = round_limits(world);
    let mut conn = world.pool.get().await.expect("connection");
    scheduler::begin_round(&mut conn).await.expect("a round");
    let state = scheduler::read_state(&mut conn, &limits, default_cap)
        .await
        .expect("a round's read");
    scheduler::rollback_round(&mut conn)
        .await
        .expect("the round's end");
    state
        .occupancy
        .iter()
        .filter(|occupancy| occupancy.tenant_id == tenant_id)
        .fold((0, 0), |(running, in_flight), occupancy| {
            (running + occupancy.running, in_flight + occupancy.in_flight)
        })
}

/// A mark comes a linger after its push (`publishing::Marks`), so a worker may claim a
/// job while its event is still `PUBLISHING`. In flight is what a worker can still
/// claim: such a job is running, not also in flight. Counted twice, it held a place of
/// its queue's in-flight bound and of its tenant's cap that no message used, until the
/// mark, and throttled a drain by the linger of every round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_job_whose_event_is_not_marked_yet_counts_as_running_only() {
    let world = World::new().await;
    let enqueued = enqueue_for(&world, world.tenant_id).await;
    let (mut round, claimed) = open_round(&world).await;
    assert_eq!(claimed.events.len(), 1, "the round claims the due event");
    scheduler::commit_round(&mut round).await.expect("commit");
    assert_eq!(
        occupancy_of(&world, world.tenant_id).await,
        (0, 1),
        "an event being published is in flight"
    );

    let mut worker = world.pool.get().await.expect("connection");
    jobs::claim_job(
        &mut worker,
        enqueued.job_id,
        enqueued.event_id,
        "worker-test",
        Uuid::now_v7(),
        LEASE,
    )
    .await
    .expect("claim")
    .expect("the job is claimed before its event is marked");
    assert_eq!(
        world.events(enqueued.job_id).await[0].status,
        EventStatus::Publishing
    );
    assert_eq!(
        occupancy_of(&world, world.tenant_id).await,
        (1, 0),
        "the claimed job is running and nothing of it is in flight"
    );
}

/// The publisher's marks come a linger after the push, from the process's mark writer
/// (`publishing::Marks`); by the time a graceful stop returns, every event it pushed is
/// marked (the stop writes the marks still waiting), so no claim is left for claim
/// recovery to publish again after `dispatcher.claim_timeout_seconds`. (The probe of
/// the list outlasts the linger, so this does not catch a stop that forgets the waiting
/// marks: `express::a_flush_writes_the_mark_of_every_event_pushed_before_it` pins the
/// writer's flush.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_publisher_has_marked_every_event_it_pushed() {
    let world = World::new().await;
    let enqueued = world.enqueue().await;
    let publisher = Publisher::new(
        &world.context.settings,
        world.pool.clone(),
        world.redis.clone(),
    );
    let stop = CancellationToken::new();
    let running = tokio::spawn({
        let stop = stop.clone();
        async move { publisher.run(Arc::new(Notify::new()), stop).await }
    });
    eventually(DEADLINE, "the message is pushed", || async {
        (list_length(&world).await == 1).then_some(())
    })
    .await;
    stop.cancel();
    tokio::time::timeout(DEADLINE, running)
        .await
        .expect("the publisher stops")
        .expect("the publisher's task");
    assert_eq!(
        world.events(enqueued.job_id).await[0].status,
        EventStatus::Published,
        "the stop wrote the mark"
    );
}

/// Heap pages of the events and jobs tables one round's state read fetches, in a round
/// round of its own (`begin_round`, then `read_state`), as the publisher runs it.
/// The backend's counters are read before and after the read, in the same transaction:
/// they hold what earlier transactions on the connection fetched until PostgreSQL
/// flushes them (at most once a second).
async fn round_read_heap_pages(world: &World) -> i64 {
    #[derive(diesel::QueryableByName)]
    struct Pages {
        #[diesel(sql_type = BigInt)]
        pages: i64,
    }
    async fn pages(conn: &mut diesel_async::AsyncPgConnection) -> Result<i64, DbError> {
        let query = diesel::sql_query(
            "SELECT (pg_stat_get_xact_blocks_fetched('outbox_events'::regclass) \
                   + pg_stat_get_xact_blocks_fetched('processing_jobs'::regclass))::int8 AS pages",
        );
        Ok(diesel_async::RunQueryDsl::get_result::<Pages>(query, conn)
            .await?
            .pages)
    }
    let (limits, default_cap) = round_limits(world);
    let mut conn = world.pool.get().await.expect("connection");
    scheduler::begin_round(&mut conn).await.expect("a round");
    let before = pages(&mut conn).await.expect("pages before");
    scheduler::read_state(&mut conn, &limits, default_cap)
        .await
        .expect("a round's read");
    let read = pages(&mut conn).await.expect("pages after") - before;
    scheduler::rollback_round(&mut conn)
        .await
        .expect("the round's end");
    read
}

/// Every event of a drain passes through `PUBLISHING` and every job through `RUNNING`:
/// the partial indexes the round counts them by fill with dead entries until autovacuum
/// comes. A round must skip those (a plain index scan marks them dead once); a bitmap
/// scan, which the planner chose for these counts, fetched every dead entry's heap page
/// again on every round (docs/decisions.md, "No bitmap scans in the round"). Pages, not
/// time: the count is the same on any machine.
///
/// An index scan can only mark an entry whose row no snapshot still sees, and the
/// dispatcher's own maintenance holds snapshots of this database now and then: on a
/// loaded machine one read may still meet a few entries the next one skips. So the test
/// waits, with a deadline, for the read to come down, with autovacuum off for both tables:
/// only the round's own scans can clean the entries, and a bitmap scan never does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_reads_no_more_heap_pages_after_a_drain_than_before_it() {
    const JOBS: usize = 2_000;
    let world = World::new().await;
    let mut conn = world.pool.get().await.expect("connection");
    diesel_async::SimpleAsyncConnection::batch_execute(
        &mut *conn,
        "ALTER TABLE outbox_events_live SET (autovacuum_enabled = off); \
         ALTER TABLE outbox_events_delivered SET (autovacuum_enabled = off); \
         ALTER TABLE processing_jobs SET (autovacuum_enabled = off);",
    )
    .await
    .expect("autovacuum off");
    let before = round_read_heap_pages(&world).await;

    for chunk in 0..JOBS / 500 {
        let batch: Vec<NewJob<BenchNoop>> = (0..500)
            .map(|_| NewJob::new(world.tenant_id, BenchNoop {}, 3, None))
            .collect();
        let enqueued = jobs::enqueue_many(&mut conn, &batch)
            .await
            .expect("enqueue");
        assert_eq!(enqueued.len(), 500, "chunk {chunk}");
    }
    drop(conn);
    // The test pops whole lists and claims what it popped one by one; on a loaded
    // machine that outlasts the test settings' 2 s lost-message grace, and recovery gave
    // the last popped jobs new events, so their messages claimed nothing. Not what this
    // test is about: the grace is the production default.
    world.start_dispatcher_with(|settings| settings.dispatcher.lost_message_grace_seconds = 30);
    let mut seen = HashSet::new();
    while seen.len() < JOBS {
        run_published(&world, &mut seen).await;
    }

    // The first reads after the drain meet the dead entries and mark them; from then on
    // a read must not fetch them again.
    let last = std::cell::Cell::new(None);
    let (last_read, world) = (&last, &world);
    let settled = within(DEADLINE, || async move {
        let after = round_read_heap_pages(world).await;
        last_read.set(Some(after));
        (after <= before + 8).then_some(after)
    })
    .await;
    assert!(
        settled.is_some(),
        "a round's read still fetched {:?} heap pages after {JOBS} jobs drained, {before} before",
        last.get()
    );
}
