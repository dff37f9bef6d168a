//! The plans of the hot statements hold whatever PostgreSQL's statistics say. After a
//! vacuum of an idle queue, the partial indexes of queued, pending and publishing rows are
//! recorded empty, and the planner estimates them so, however many rows they hold again,
//! until the next ANALYZE; retention's cutoffs are parameters it cannot estimate. Each
//! test builds that state for real and counts the blocks a statement reads (the
//! backend's own counters for the tables and their indexes, in one transaction): blocks,
//! not time, so the bound holds on any machine (docs/decisions.md, "Lookups by key ignore
//! the statistics").

use std::time::Duration;

use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use quire_shared::db::jobs::{self, ClaimRequest, NewJob};
use quire_shared::db::maintenance::{self, LostScope, Retention};
use quire_shared::db::outbox::{self, ClaimedEvent, Published};
use quire_shared::db::stats;
use quire_shared::db::{self, DbError, SessionKind, scheduler};
use quire_shared::jobs::{BackgroundJob, BenchNoop};
use quire_shared::scheduling::Limits;
use uuid::Uuid;

use crate::support::World;

/// A statement that goes by key reads a few dozen index and heap pages per row it changes
/// (its lookups, the new row versions and their index entries: 17 to 55 here); one that
/// scans a partial index reads the backlog's pages, about 800 for 40,000 queued jobs.
const BLOCKS_PER_ROW: i64 = 80;

/// A retention pass that prunes nothing reads its indexes' ends, the planner's probes of
/// them and a few catalog-kept pages (about 120 blocks here); one that scans the
/// history it keeps read 20,598 for 20,000 finished jobs.
const RETENTION_BLOCKS: i64 = 500;

/// The queue state's outbox figures beside the backlog: a count that stops after
/// `stats::PENDING_COUNTED_UP_TO` + 1 events reads their index and heap pages, a few dozen.
const OUTBOX_FIGURES_BLOCKS: i64 = 400;

/// Events a round claims: few, so that a scan of the backlog shows per row.
const BATCH: i64 = 4;

/// The backlog the statistics call empty.
const BACKLOG: usize = 40_000;

/// Blocks read so far in this transaction from the queue's two tables (the events' in
/// both partitions) and their indexes.
async fn blocks(conn: &mut AsyncPgConnection) -> Result<i64, DbError> {
    #[derive(diesel::QueryableByName)]
    struct Blocks {
        #[diesel(sql_type = BigInt)]
        blocks: i64,
    }
    Ok(diesel::sql_query(
        "WITH tables AS ( \
             SELECT 'processing_jobs'::regclass AS oid \
             UNION ALL SELECT relid FROM pg_partition_tree('outbox_events')) \
         SELECT sum(pg_stat_get_xact_blocks_fetched(c.oid))::int8 AS blocks FROM pg_class AS c \
         WHERE c.oid IN (SELECT oid FROM tables) \
            OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT oid FROM tables))",
    )
    .get_result::<Blocks>(conn)
    .await?
    .blocks)
}

/// What a round of these tests plans with: few events ([`BATCH`]), the rest as
/// configured; and the tenants' running cap.
fn round_limits(world: &World) -> (Limits, i64) {
    let settings = &world.context.settings;
    let limits = Limits {
        batch_size: BATCH,
        ..Limits::from_settings(settings)
    };
    (limits, settings.scheduling.max_running_per_tenant)
}

/// Each claimed event pushed, as Redis would have acknowledged it: a task of its own.
fn publications(claimed: &[ClaimedEvent]) -> Vec<Published> {
    claimed
        .iter()
        .map(|event| Published {
            event_id: event.id,
            task_id: Uuid::now_v7(),
        })
        .collect()
}

/// Each statement of `read` (its name, the blocks it read per row it changed) went by
/// key beside `beside`.
fn assert_by_key(read: &[(&str, i64)], beside: &str) {
    for (statement, blocks) in read {
        assert!(
            *blocks <= BLOCKS_PER_ROW,
            "{statement} read {blocks} blocks a row beside {beside}: {read:?}"
        );
    }
}

async fn enqueue(world: &World, count: usize) -> Vec<Uuid> {
    let mut conn = world.pool.get().await.expect("connection");
    let mut ids = Vec::with_capacity(count);
    for _ in 0..count.div_ceil(1000) {
        let batch: Vec<NewJob<BenchNoop>> = (0..1000.min(count - ids.len()))
            .map(|_| NewJob::new(world.tenant_id, BenchNoop {}, 3, None))
            .collect();
        let enqueued = jobs::enqueue_many(&mut conn, &batch)
            .await
            .expect("enqueue");
        ids.extend(
            enqueued
                .into_iter()
                .map(|job| job.expect("enqueued").job_id),
        );
    }
    ids
}

/// Jobs that came and went (cancelled: queued, pending, then finished), then a vacuum
/// with the queue idle, as autovacuum leaves a quiet queue.
async fn an_idle_vacuumed_queue(world: &World, jobs_that_went: usize) {
    let gone = enqueue(world, jobs_that_went).await;
    let mut conn = world.pool.get().await.expect("connection");
    for chunk in gone.chunks(1000) {
        jobs::cancel_jobs(&mut conn, chunk, "gone before the test")
            .await
            .expect("cancel");
    }
    diesel::sql_query("VACUUM (ANALYZE) processing_jobs, outbox_events")
        .execute(&mut conn)
        .await
        .expect("vacuum");
}

/// One round's claim, the mark of what it published, a worker's claim of one of those
/// jobs, its finish and a lost-message pass over the announced jobs, beside a backlog of
/// 40,000 jobs the statistics call none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_path_of_a_job_goes_by_key_beside_a_backlog_the_statistics_call_empty() {
    let world = World::new().await;
    an_idle_vacuumed_queue(&world, 3_000).await;
    enqueue(&world, BACKLOG).await;

    let (limits, cap) = round_limits(&world);
    let mut conn = world.pool.get().await.expect("connection");
    // The whole path in the round's transaction: the block counters are per transaction.
    scheduler::begin_round(&mut conn).await.expect("a round");
    let read = async {
        let conn = &mut *conn;
        let (claimed, published, [round, mark]) = a_round_and_its_mark(conn, &limits, cap).await?;
        let after_mark = blocks(conn).await?;
        let ([event, ..], [first, ..]) = (claimed.as_slice(), published.as_slice()) else {
            panic!("the round claimed no event");
        };
        let request = ClaimRequest {
            job_id: event.job_id,
            event_id: first.event_id,
            task_id: first.task_id,
        };
        let job = jobs::claim_jobs(conn, &[request], "worker-test", Duration::from_secs(60))
            .await?
            .pop()
            .expect("the job is claimed")
            .job;
        let after_claim = blocks(conn).await?;
        let finished = jobs::mark_succeeded(conn, &job.fence().expect("fence")).await?;
        let after_finish = blocks(conn).await?;
        // The announced jobs are in flight, none lost: a pass reads them, not the
        // backlog behind them.
        let grace = Duration::from_secs(30);
        let lost = maintenance::reannounce_lost(
            conn,
            BenchNoop::JOB_TYPE,
            None,
            grace,
            100,
            LostScope::Announced,
        )
        .await?;
        let after_lost = blocks(conn).await?;
        assert_eq!(lost, 0, "nothing is lost");
        assert!(finished, "the finish's fence holds");
        // Blocks per row each statement changed.
        Ok::<_, DbError>([
            round,
            mark,
            ("the worker's claim", after_claim - after_mark),
            ("the finish", after_finish - after_claim),
            ("a lost-message pass", after_lost - after_finish),
        ])
    }
    .await
    .expect("the path of a job");
    scheduler::rollback_round(&mut conn)
        .await
        .expect("the round's end");
    assert_by_key(
        &read,
        &format!("{BACKLOG} queued jobs the statistics call none"),
    );
}

/// One round's claim and the mark of what it published (the statements the dispatcher
/// runs on every batch): the events, their publications, and the blocks each statement
/// read per event.
async fn a_round_and_its_mark(
    conn: &mut AsyncPgConnection,
    limits: &Limits,
    cap: i64,
) -> Result<(Vec<ClaimedEvent>, Vec<Published>, [(&'static str, i64); 2]), DbError> {
    let start = blocks(conn).await?;
    let claimed = scheduler::claim_in_round(conn, "dispatcher-test", limits, cap)
        .await?
        .events;
    let after_round = blocks(conn).await?;
    let published = publications(&claimed);
    let marked = outbox::mark_published(conn, "dispatcher-test", &published).await?;
    let after_mark = blocks(conn).await?;
    assert!(marked > 0, "the round claimed and marked events");
    assert_eq!(marked, claimed.len());
    let events = i64::try_from(marked).expect("a small batch");
    let read = [
        ("the round's read and claim", (after_round - start) / events),
        ("the mark published", (after_mark - after_round) / events),
    ];
    Ok((claimed, published, read))
}

/// A session plans a statement once and keeps that plan (a generic plan, after the
/// first few runs). The dispatcher's first rounds on a new installation plan while the
/// delivered partition of `outbox_events` is empty, where reading it whole is the
/// cheapest plan; the same plans must still go by key once it holds a history. Before
/// the round's claim and the mark stayed on the live partition (`db::live_event!`), each
/// read the whole delivered partition on every call: 930 blocks a round in the bench;
/// before the round planned without sequential scans, its read of the jobs in flight
/// read it once per job in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_made_before_any_event_was_delivered_still_go_by_key_beside_a_history() {
    let world = World::new().await;
    let (limits, cap) = round_limits(&world);
    let mut conn = world.pool.get().await.expect("connection");
    // No ANALYZE may replace the plans the test made, and the session keeps the generic
    // plan from the first run (what it would choose after five).
    conn.batch_execute(
        "ALTER TABLE outbox_events_delivered SET (autovacuum_enabled = off); \
         ALTER TABLE outbox_events_live SET (autovacuum_enabled = off); \
         SET plan_cache_mode = force_generic_plan",
    )
    .await
    .expect("the session's planning");
    // A queue with a backlog, as the bench's first rounds see it: only the delivered
    // partition is empty when the plans are made.
    enqueue(&world, 5_000).await;
    // and the first few events delivered: a page of them.
    let first = enqueue(&world, 10).await;
    jobs::cancel_jobs(&mut conn, &first, "delivered before the plans")
        .await
        .expect("cancel");

    // The first round's jobs stay in flight (announced, unclaimed): every later round
    // counts them, with their events' class, from the delivered partition.
    scheduler::begin_round(&mut conn).await.expect("a round");
    a_round_and_its_mark(&mut conn, &limits, cap)
        .await
        .expect("the first round, on an empty history");
    scheduler::commit_round(&mut conn)
        .await
        .expect("the round's end");

    // A history of delivered events (cancelled ones), planned for by no one.
    let gone = enqueue(&world, 20_000).await;
    for chunk in gone.chunks(1000) {
        jobs::cancel_jobs(&mut conn, chunk, "gone before the test")
            .await
            .expect("cancel");
    }

    scheduler::begin_round(&mut conn).await.expect("a round");
    let (_, _, read) = a_round_and_its_mark(&mut conn, &limits, cap)
        .await
        .expect("a round beside the history");
    scheduler::rollback_round(&mut conn)
        .await
        .expect("the round's end");
    assert_by_key(
        &read,
        "20,000 delivered events, in plans made when there were none",
    );
}

/// The worker's and the dispatcher's sessions keep generic plans (`SessionKind`), made
/// on whatever the queue held the first time each statement ran: on a new installation,
/// its first jobs. Where a table is small, reading it whole and hashing it is the
/// cheapest way to find a batch's rows by key, and the plan stays until an ANALYZE makes
/// PostgreSQL plan again. The worker's claim and finish and the dispatcher's mark, each
/// planned in a session of its own kind beside 1,000 queued jobs, must still go by key
/// beside 40,000 more. Before those sessions planned without sequential scans, the claim
/// and the finish read `processing_jobs` whole on every call: 195 and 189 blocks a job
/// here, 21 and 15 by key (`auto_explain` over a bench of 1,000 jobs showed it first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_made_on_a_small_queue_still_go_by_key_beside_a_large_one() {
    let world = World::new().await;
    let database = &world.context.settings.database;
    let workers = db::build_pool_with(database, SessionKind::Worker).expect("worker pool");
    let dispatchers =
        db::build_pool_with(database, SessionKind::Dispatcher).expect("dispatcher pool");
    let mut worker = workers.get().await.expect("a worker's connection");
    let mut dispatcher = dispatchers.get().await.expect("a dispatcher's connection");
    world
        .pool
        .get()
        .await
        .expect("connection")
        .batch_execute(
            "ALTER TABLE processing_jobs SET (autovacuum_enabled = off); \
             ALTER TABLE outbox_events_delivered SET (autovacuum_enabled = off); \
             ALTER TABLE outbox_events_live SET (autovacuum_enabled = off)",
        )
        .await
        .expect("no analyze replaces the plans");

    enqueue(&world, 1_000).await;
    a_batch_through_service_sessions(&world, &mut dispatcher, &mut worker)
        .await
        .expect("the first batch, planned beside 1,000 jobs");
    enqueue(&world, BACKLOG).await;
    let read = a_batch_through_service_sessions(&world, &mut dispatcher, &mut worker)
        .await
        .expect("a batch beside the backlog");
    assert_by_key(
        &read,
        &format!("{BACKLOG} queued jobs, in plans made beside 1,000"),
    );
}

/// A round's batch (on the tests' own connection), its mark in `dispatcher`'s session,
/// and the claim and finish of its jobs in `worker`'s, each in a transaction of its own
/// that counts the blocks it read: blocks per job.
async fn a_batch_through_service_sessions(
    world: &World,
    dispatcher: &mut AsyncPgConnection,
    worker: &mut AsyncPgConnection,
) -> Result<[(&'static str, i64); 3], DbError> {
    let (limits, cap) = round_limits(world);
    let mut conn = world.pool.get().await.expect("connection");
    scheduler::begin_round(&mut conn).await?;
    let claimed = scheduler::claim_in_round(&mut conn, "dispatcher-test", &limits, cap)
        .await?
        .events;
    scheduler::commit_round(&mut conn).await?;
    let published = publications(&claimed);
    let rows = i64::try_from(claimed.len()).expect("a small batch");
    assert!(rows > 0, "the round claimed events");

    let (marked, mark) = dispatcher
        .transaction::<_, DbError, _>(async |conn| {
            let start = blocks(conn).await?;
            let marked = outbox::mark_published(conn, "dispatcher-test", &published).await?;
            Ok((marked, blocks(conn).await? - start))
        })
        .await?;
    assert_eq!(marked, claimed.len(), "the mark holds");

    let requests: Vec<ClaimRequest> = claimed
        .iter()
        .zip(&published)
        .map(|(event, publication)| ClaimRequest {
            job_id: event.job_id,
            event_id: event.id,
            task_id: publication.task_id,
        })
        .collect();
    let (jobs, finished, claim, finish) = worker
        .transaction::<_, DbError, _>(async |conn| {
            let start = blocks(conn).await?;
            let jobs =
                jobs::claim_jobs(conn, &requests, "worker-test", Duration::from_secs(60)).await?;
            let after_claim = blocks(conn).await?;
            let fences: Vec<_> = jobs
                .iter()
                .map(|claimed| claimed.job.fence().expect("fence"))
                .collect();
            let finished = jobs::mark_succeeded_many(conn, &fences).await?;
            let after_finish = blocks(conn).await?;
            Ok((
                jobs,
                finished,
                after_claim - start,
                after_finish - after_claim,
            ))
        })
        .await?;
    assert_eq!(
        (jobs.len(), finished.len()),
        (claimed.len(), claimed.len()),
        "every job is claimed and finished"
    );
    Ok([
        ("the mark", mark / rows),
        ("the worker's claim", claim / rows),
        ("the finish", finish / rows),
    ])
}

/// A retention pass with nothing old enough to prune reads its indexes up to the cutoff,
/// not the 20,000 finished jobs and their events it keeps, in the plan the dispatcher
/// runs it with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retention_pass_reads_what_it_prunes_not_the_history_it_keeps() {
    let world = World::new().await;
    an_idle_vacuumed_queue(&world, 20_000).await;
    let retention = Retention {
        events: Duration::from_secs(7 * 86_400),
        finished_jobs: Duration::from_secs(30 * 86_400),
        failed_jobs: Duration::from_secs(90 * 86_400),
        tenant_events: Duration::from_secs(72 * 3_600),
        batch: 1000,
    };
    let mut conn = world.pool.get().await.expect("connection");
    let (pruned, read) = conn
        .transaction::<_, DbError, _>(async |conn| {
            // The plan a long-running dispatcher keeps: after five runs the plan cache
            // settles on the generic plan, which cannot see the cutoffs' values.
            diesel::sql_query("SET LOCAL plan_cache_mode = force_generic_plan")
                .execute(conn)
                .await?;
            let start = blocks(conn).await?;
            let pruned = maintenance::prune(conn, &retention).await?;
            Ok((pruned, blocks(conn).await? - start))
        })
        .await
        .expect("a retention pass");
    assert_eq!(
        (pruned.events, pruned.jobs),
        (0, 0),
        "nothing is old enough"
    );
    assert!(
        read <= RETENTION_BLOCKS,
        "a retention pass read {read} blocks to prune nothing beside 20,000 finished jobs"
    );
}

/// The queue state's outbox figures (the pending count and the lag, every refresh) read
/// a bounded part of a backlog: the count stops after [`stats::PENDING_COUNTED_UP_TO`] + 1 and
/// the lag reads each tenant's first due event (73 blocks here). Counting every pending
/// event and taking the minimum over them read 3,580 blocks here, and 2.8 s a refresh
/// beside a million.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outbox_figures_read_a_bounded_part_of_the_backlog() {
    #[derive(diesel::QueryableByName)]
    struct Lag {
        #[diesel(sql_type = diesel::sql_types::Double)]
        seconds: f64,
    }
    let world = World::new().await;
    an_idle_vacuumed_queue(&world, 3_000).await;
    let backlog = enqueue(&world, BACKLOG).await;
    // The oldest pending event is not due yet: the lag is the next one's age.
    let oldest = world.events(backlog[0]).await;
    World::execute(
        &world,
        "UPDATE outbox_events SET next_attempt_at = now() + interval '1 hour' WHERE id = $1",
        oldest[0].id,
    )
    .await;

    let mut conn = world.pool.get().await.expect("connection");
    let (active, read, expected_lag) = conn
        .transaction::<_, DbError, _>(async |conn| {
            let start = blocks(conn).await?;
            let active = stats::active_events(conn).await?;
            let read = blocks(conn).await? - start;
            // The same transaction's `now()`: the full minimum, for comparison.
            let lag = diesel::sql_query(
                "SELECT extract(epoch FROM now() - min(next_attempt_at))::float8 AS seconds \
                 FROM outbox_events WHERE status = 'PENDING' AND next_attempt_at <= now()",
            )
            .get_result::<Lag>(conn)
            .await?;
            Ok((active, read, lag.seconds))
        })
        .await
        .expect("the outbox figures");
    assert_eq!(
        active.lag_seconds, expected_lag,
        "the lag is the oldest due event's age"
    );
    let total = i64::try_from(BACKLOG).expect("a small backlog");
    assert_eq!(
        active.pending(total),
        (total, true),
        "above the counted figure, the pending events are the queued jobs"
    );
    assert!(
        read <= OUTBOX_FIGURES_BLOCKS,
        "the outbox figures read {read} blocks beside {BACKLOG} pending events"
    );
}
