//! Retention: delivered events no active job depends on and finished jobs are deleted
//! after their ages, `FAILED` jobs kept longer; active work is never touched.

use std::time::Duration;

use quire_dispatcher::maintenance::{Retention, Task};
use quire_shared::actions::ops_sessions;
use quire_shared::db::event_stream;
use quire_shared::db::jobs::{self, Enqueued};
use quire_shared::db::maintenance::Retention as Ages;
use quire_shared::db::tenant_events::{self, EventCursor, NewTenantEvent, TenantEventType};
use quire_shared::test_support::{self, DEADLINE};
use uuid::Uuid;

use crate::support::World;

const DAY: Duration = Duration::from_secs(24 * 3600);

fn ages() -> Ages {
    Ages {
        events: 7 * DAY,
        finished_jobs: 30 * DAY,
        failed_jobs: 90 * DAY,
        tenant_events: 3 * DAY,
        batch: 1000,
    }
}

/// Runs the job and finishes it, `SUCCEEDED` or `FAILED`, `days` ago.
async fn finished(world: &World, succeeded: bool, days: i32) -> Enqueued {
    let enqueued = world.enqueue().await;
    let fence = world
        .claim(enqueued, Duration::from_secs(60))
        .await
        .fence()
        .expect("fence");
    let mut conn = world.pool.get().await.expect("connection");
    let done = if succeeded {
        jobs::mark_succeeded(&mut conn, &fence).await
    } else {
        jobs::mark_failed(&mut conn, &fence, "test_failure", "failed for the test").await
    };
    assert!(done.expect("finish"), "the job finished");
    world
        .execute(
            &format!(
                "UPDATE processing_jobs SET finished_at = now() - interval '{days} days' WHERE id = $1"
            ),
            enqueued.job_id,
        )
        .await;
    enqueued
}

/// Marks the job's events published and created `days` ago.
async fn delivered(world: &World, job_id: Uuid, days: i32) {
    world
        .execute(
            &format!(
                "UPDATE outbox_events SET status = 'PUBLISHED', published_at = now(), \
                 created_at = now() - interval '{days} days' WHERE job_id = $1"
            ),
            job_id,
        )
        .await;
}

async fn exists(world: &World, job_id: Uuid) -> bool {
    let mut conn = world.pool.get().await.expect("connection");
    jobs::find_job(&mut conn, job_id)
        .await
        .expect("query job")
        .is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_jobs_go_after_their_age_and_failed_ones_are_kept_longer() {
    let world = World::new().await;
    let succeeded_old = finished(&world, true, 31).await;
    let succeeded_recent = finished(&world, true, 1).await;
    let failed_kept = finished(&world, false, 31).await;
    let failed_old = finished(&world, false, 91).await;
    let queued = world.enqueue().await;
    world
        .execute(
            "UPDATE processing_jobs SET queued_at = now() - interval '100 days' WHERE id = $1",
            queued.job_id,
        )
        .await;

    let pruned = Retention::new(world.pool.clone(), ages())
        .run_once()
        .await
        .expect("retention")
        .expect("no other dispatcher holds the lock");

    assert_eq!(pruned.jobs, 2);
    assert!(!exists(&world, succeeded_old.job_id).await);
    assert!(!exists(&world, failed_old.job_id).await);
    assert!(
        world.events(succeeded_old.job_id).await.is_empty(),
        "a pruned job's events go with it"
    );
    assert!(exists(&world, succeeded_recent.job_id).await);
    assert!(
        exists(&world, failed_kept.job_id).await,
        "a failed job is kept for inspection"
    );
    assert!(
        exists(&world, queued.job_id).await,
        "active work is never pruned"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_delivered_events_go_unless_an_active_job_still_depends_on_them() {
    let world = World::new().await;
    let done = finished(&world, true, 1).await;
    delivered(&world, done.job_id, 8).await;
    let waiting = world.enqueue().await;
    delivered(&world, waiting.job_id, 8).await;
    let recent = finished(&world, true, 1).await;
    delivered(&world, recent.job_id, 1).await;

    let pruned = Retention::new(world.pool.clone(), ages())
        .run_once()
        .await
        .expect("retention")
        .expect("no other dispatcher holds the lock");

    assert_eq!((pruned.events, pruned.jobs), (1, 0));
    assert!(world.events(done.job_id).await.is_empty());
    assert!(
        exists(&world, done.job_id).await,
        "the job outlives its event"
    );
    assert_eq!(
        world.events(waiting.job_id).await.len(),
        1,
        "a queued job's current event is what lost-message recovery reads"
    );
    assert_eq!(world.events(recent.job_id).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_dashboard_sessions_are_pruned_and_live_ones_kept() {
    let world = World::new().await;
    let settings = &world.context.settings;
    let token = |name: &str| {
        quire_shared::auth::mint_admin(&settings.auth, name, Duration::from_secs(600))
            .expect("mint")
    };
    let mut conn = world.pool.get().await.expect("connection");
    let expired = ops_sessions::open(&mut conn, &settings.auth, &settings.ops, &token("old"))
        .await
        .expect("open");
    let live = ops_sessions::open(&mut conn, &settings.auth, &settings.ops, &token("new"))
        .await
        .expect("open");
    world
        .execute(
            "UPDATE ops_sessions SET expires_at = now() - interval '1 second' WHERE id = $1",
            expired.session.id,
        )
        .await;

    let pruned = Retention::new(world.pool.clone(), ages())
        .run_once()
        .await
        .expect("retention")
        .expect("no other dispatcher holds the lock");

    assert_eq!(pruned.sessions, 1);
    let left: Vec<Uuid> = ops_sessions::list(&mut conn)
        .await
        .expect("list")
        .into_iter()
        .map(|session| session.id)
        .collect();
    assert_eq!(left, vec![live.session.id], "the live session is kept");
    let remaining: i64 = diesel_async::RunQueryDsl::get_result(
        diesel::dsl::select(diesel::dsl::sql::<diesel::sql_types::BigInt>(
            "(SELECT count(*) FROM ops_sessions)",
        )),
        &mut conn,
    )
    .await
    .expect("count");
    assert_eq!(remaining, 1, "the expired row is gone, not just hidden");
}

/// The tenant's events still stored, straight from the table (the log's readers wait
/// for older open transactions of the whole cluster; this does not).
async fn stored_events(world: &World) -> Vec<tenant_events::TenantEvent> {
    let mut conn = world.pool.get().await.expect("connection");
    diesel_async::RunQueryDsl::load(
        diesel::sql_query(
            "SELECT id, tenant_id, event_type, subject_id, payload, txid, created_at \
             FROM tenant_events WHERE tenant_id = $1 ORDER BY txid, id",
        )
        .bind::<diesel::sql_types::Uuid, _>(world.tenant_id),
        &mut conn,
    )
    .await
    .expect("events")
}

/// Records a `document.trashed` event of the world's tenant created `days` ago.
async fn tenant_event(world: &World, days: i32) -> tenant_events::TenantEvent {
    let mut conn = world.pool.get().await.expect("connection");
    let id = tenant_events::record(
        &mut conn,
        &NewTenantEvent {
            tenant_id: world.tenant_id,
            event_type: TenantEventType::DocumentTrashed,
            subject_id: Uuid::now_v7(),
            payload: serde_json::json!({ "days_ago": days }),
        },
    )
    .await
    .expect("record");
    diesel_async::RunQueryDsl::execute(
        diesel::sql_query(format!(
            "UPDATE tenant_events SET created_at = now() - interval '{days} days' WHERE id = $1"
        ))
        .bind::<diesel::sql_types::Int8, _>(id),
        &mut conn,
    )
    .await
    .expect("backdate");
    stored_events(world)
        .await
        .into_iter()
        .find(|event| event.id == id)
        .expect("the event is stored")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_tenant_events_go_and_the_tenants_horizon_moves_to_the_last_one_pruned() {
    let world = World::new().await;
    let oldest = tenant_event(&world, 5).await;
    let old = tenant_event(&world, 4).await;
    let recent = tenant_event(&world, 1).await;

    let pruned = Retention::new(world.pool.clone(), ages())
        .run_once()
        .await
        .expect("retention")
        .expect("no other dispatcher holds the lock");

    assert_eq!(pruned.tenant_events, 2);
    assert_eq!(
        stored_events(&world).await,
        vec![recent.clone()],
        "the recent event is kept"
    );
    let mut conn = world.pool.get().await.expect("connection");
    // A reader that had seen the last pruned event missed nothing (the page waits for
    // older transactions anywhere in the cluster: the suite runs in parallel).
    let from_last_pruned = test_support::eventually(DEADLINE, "the recent event is read", || {
        let pool = world.pool.clone();
        let tenant = world.tenant_id;
        let after = EventCursor::of(&old);
        async move {
            let mut conn = pool.get().await.expect("connection");
            let page = event_stream::read_page(&mut conn, tenant, Some(after), 100)
                .await
                .expect("resume after the last pruned event");
            (!page.events.is_empty()).then_some(page.events)
        }
    })
    .await;
    assert_eq!(from_last_pruned, vec![recent]);
    // One that had not seen it may have missed it, and is told so.
    for before in [EventCursor::of(&oldest), EventCursor::START] {
        let refused = event_stream::read_page(&mut conn, world.tenant_id, Some(before), 100).await;
        assert!(
            matches!(refused, Err(event_stream::StreamError::Pruned)),
            "{before:?}: {refused:?}"
        );
    }
}
