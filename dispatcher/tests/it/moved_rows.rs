//! The statements that write live outbox events, each waiting for an event row that a
//! concurrent mark or cancel moves out of the live partition (`outbox_events` is
//! partitioned by status). PostgreSQL does not follow a row moved to another partition:
//! it refuses the waiting statement ("already moved to another partition"), where a row
//! updated in place is re-checked against the statement's guard and skipped. Each
//! statement runs again (`db::moved`) and answers as it did before the partitions: the
//! moved row skipped, nothing failed. Each test holds the move uncommitted until the other
//! statement waits for its lock, for real.

use std::time::Duration;

use diesel_async::{
    AnsiTransactionManager, AsyncConnection, AsyncPgConnection, RunQueryDsl, TransactionManager,
};
use quire_shared::db::PooledConnection;
use quire_shared::db::jobs::{self, Enqueued};
use quire_shared::db::outbox::{self, Published};
use quire_shared::db::tenant_data;
use quire_shared::states::{EventStatus, JobStatus};
use quire_shared::test_support::await_lock_wait;
use uuid::Uuid;

use crate::support::{DEADLINE, World};

const DISPATCHER: &str = "dispatcher-test";

/// A queued job whose event `DISPATCHER` claimed (`PUBLISHING`), as a round leaves it.
async fn claimed_event(world: &World) -> Enqueued {
    let enqueued = world.enqueue().await;
    let mut conn = world.pool.get().await.expect("connection");
    let claimed = outbox::claim_due_events(&mut conn, DISPATCHER, 10)
        .await
        .expect("claim");
    assert_eq!(
        claimed.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![enqueued.event_id]
    );
    enqueued
}

fn published(enqueued: Enqueued) -> [Published; 1] {
    [Published {
        event_id: enqueued.event_id,
        task_id: Uuid::now_v7(),
    }]
}

/// Opens the mover's transaction through diesel's transaction manager, which the
/// statements' own savepoints nest in.
async fn begin(mover: &mut AsyncPgConnection) {
    AnsiTransactionManager::begin_transaction(mover)
        .await
        .expect("begin");
}

/// A connection whose open transaction marked the event published (moved it to the
/// delivered partition), not committed yet.
async fn mark_held_open(world: &World, enqueued: Enqueued) -> PooledConnection {
    let mut mover = world.pool.get().await.expect("connection");
    begin(&mut mover).await;
    let marked = outbox::mark_published(&mut mover, DISPATCHER, &published(enqueued))
        .await
        .expect("mark");
    assert_eq!(marked, 1);
    mover
}

/// Commits the move `mover` holds once `waiter` waits for its lock; the waiter's answer.
async fn commit_under<T: Send + 'static>(
    world: &World,
    mover: &mut AsyncPgConnection,
    waiter: impl Future<Output = T> + Send + 'static,
) -> T {
    let waiter = tokio::spawn(waiter);
    await_lock_wait(&world.pool).await;
    AnsiTransactionManager::commit_transaction(mover)
        .await
        .expect("commit the move");
    tokio::time::timeout(DEADLINE, waiter)
        .await
        .expect("the waiting statement ends")
        .expect("its task")
}

async fn event_status(world: &World, enqueued: Enqueued) -> EventStatus {
    world.events(enqueued.job_id).await[0].status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_waiting_for_the_mark_published_cancels_the_job_and_leaves_the_event_published() {
    let world = World::new().await;
    let enqueued = claimed_event(&world).await;
    let mut mover = mark_held_open(&world, enqueued).await;

    let pool = world.pool.clone();
    let cancelled = commit_under(&world, &mut mover, async move {
        let mut conn = pool.get().await.expect("connection");
        // In a transaction, as every caller cancels.
        conn.transaction(async |conn| {
            jobs::cancel_jobs(conn, &[enqueued.job_id], "cancelled by the test").await
        })
        .await
    })
    .await;

    assert_eq!(cancelled.expect("the cancel"), 1);
    assert_eq!(
        world.job(enqueued.job_id).await.status,
        JobStatus::Cancelled
    );
    assert_eq!(event_status(&world, enqueued).await, EventStatus::Published);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mark_published_waiting_for_a_cancel_marks_nothing() {
    let world = World::new().await;
    let enqueued = claimed_event(&world).await;
    let mut mover = world.pool.get().await.expect("connection");
    begin(&mut mover).await;
    let cancelled = jobs::cancel_jobs(&mut mover, &[enqueued.job_id], "cancelled by the test")
        .await
        .expect("cancel");
    assert_eq!(cancelled, 1);

    let pool = world.pool.clone();
    let marked = commit_under(&world, &mut mover, async move {
        let mut conn = pool.get().await.expect("connection");
        outbox::mark_published(&mut conn, DISPATCHER, &published(enqueued)).await
    })
    .await;

    assert_eq!(marked.expect("the mark"), 0);
    assert_eq!(event_status(&world, enqueued).await, EventStatus::Cancelled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_recovery_waiting_for_the_mark_published_leaves_the_event_published() {
    let world = World::new().await;
    let enqueued = claimed_event(&world).await;
    World::execute(
        &world,
        "UPDATE outbox_events SET claimed_at = now() - interval '1 hour' WHERE id = $1",
        enqueued.event_id,
    )
    .await;
    let mut mover = mark_held_open(&world, enqueued).await;

    let pool = world.pool.clone();
    let released = commit_under(&world, &mut mover, async move {
        let mut conn = pool.get().await.expect("connection");
        outbox::recover_expired_claims(&mut conn, Duration::from_secs(60)).await
    })
    .await;

    assert_eq!(released.expect("claim recovery"), 0);
    assert_eq!(event_status(&world, enqueued).await, EventStatus::Published);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_deletion_waiting_for_the_mark_published_deletes_the_queued_job() {
    let world = World::new().await;
    let enqueued = claimed_event(&world).await;
    let mut mover = mark_held_open(&world, enqueued).await;

    let pool = world.pool.clone();
    let tenant_id = world.tenant_id;
    let removed = commit_under(&world, &mut mover, async move {
        let mut conn = pool.get().await.expect("connection");
        tenant_data::remove_other_jobs(&mut conn, tenant_id, Uuid::now_v7()).await
    })
    .await;

    removed.expect("the tenant's jobs removed");
    assert!(world.events(enqueued.job_id).await.is_empty());
    let mut conn = world.pool.get().await.expect("connection");
    assert!(
        jobs::find_job(&mut conn, enqueued.job_id)
            .await
            .expect("find")
            .is_none()
    );
}

/// The move into the delivered partition is an insert there. With a foreign key from the
/// event to its job, its check took `KEY SHARE` on the job row and the mark waited for
/// any transaction holding the job `FOR UPDATE` (a worker's claim, a trash), and
/// deadlocked with a trash waiting for the event in turn. The mark must finish while
/// another transaction holds the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mark_published_does_not_wait_for_a_job_row_another_transaction_holds() {
    let world = World::new().await;
    let enqueued = claimed_event(&world).await;
    let mut holder = world.pool.get().await.expect("connection");
    begin(&mut holder).await;
    diesel::sql_query("SELECT id FROM processing_jobs WHERE id = $1 FOR UPDATE")
        .bind::<diesel::sql_types::Uuid, _>(enqueued.job_id)
        .execute(&mut *holder)
        .await
        .expect("hold the job row");

    let mut conn = world.pool.get().await.expect("connection");
    let marked = tokio::time::timeout(
        DEADLINE,
        outbox::mark_published(&mut conn, DISPATCHER, &published(enqueued)),
    )
    .await
    .expect("the mark does not wait for the held job row")
    .expect("the mark");
    assert_eq!(marked, 1);
    assert_eq!(event_status(&world, enqueued).await, EventStatus::Published);
    AnsiTransactionManager::rollback_transaction(&mut *holder)
        .await
        .expect("release the job row");
}
