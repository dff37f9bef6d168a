//! The express path (docs/decisions.md, "The express path"): an intake whose queue has no
//! backlog claims its own event, and the process that recorded it publishes it after the
//! commit. With a backlog, an in-flight queue at its bound, a pause or a tenant at its
//! cap, the event is `PENDING` for the dispatchers' fair scheduler, as before; a push
//! that fails returns the event to them.

use diesel::sql_types::{Int4, Nullable, Text, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use std::time::Duration;

use quire_shared::broker;
use quire_shared::config::Settings;
use quire_shared::db::intake::{self, NewIntake, Recorded};
use quire_shared::db::pauses;
use quire_shared::db::tenants::TenantWrite;
use quire_shared::jobs::{AnalyzeDocument, BackgroundJob};
use quire_shared::publishing::{BROKER_UNAVAILABLE, Express};
use quire_shared::redis_client::RedisPool;
use quire_shared::secret::Secret;
use quire_shared::states::JobStatus;
use quire_shared::storage::StorageKey;
use quire_shared::test_support;
use uuid::Uuid;

use crate::helpers::TestApp;

#[derive(diesel::QueryableByName, Debug)]
struct EventRow {
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = Nullable<Text>)]
    claimed_by: Option<String>,
    #[diesel(sql_type = Int4)]
    publish_attempts: i32,
    #[diesel(sql_type = Nullable<Text>)]
    last_error: Option<String>,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    announced_event_id: Option<Uuid>,
}

async fn event_of(app: &TestApp, job_id: Uuid) -> EventRow {
    let mut conn = app.pool.get().await.expect("connection");
    diesel::sql_query(
        "SELECT e.status, e.claimed_by, e.publish_attempts, e.last_error, j.announced_event_id \
         FROM processing_jobs AS j JOIN outbox_events AS e ON e.id = j.current_event_id \
         WHERE j.id = $1",
    )
    .bind::<SqlUuid, _>(job_id)
    .get_result(&mut conn)
    .await
    .expect("the job's event")
}

/// The job's event once it is `PUBLISHED` (30 s at most).
async fn wait_published(app: &TestApp, job_id: Uuid, what: &str) -> EventRow {
    test_support::eventually(Duration::from_secs(30), what, || async {
        let event = event_of(app, job_id).await;
        (event.status == "PUBLISHED").then_some(event)
    })
    .await
}

fn express_on(settings: &Settings) -> Express {
    let redis = RedisPool::build(&settings.redis).expect("redis pool");
    let pool = quire_shared::db::build_pool(&settings.database).expect("pool");
    Express::from_settings(settings, "test", pool, redis).expect("express is on by default")
}

fn analysis(tenant_id: Uuid) -> NewIntake<AnalyzeDocument> {
    let version_id = Uuid::now_v7();
    let key = StorageKey::document_source(tenant_id, version_id);
    test_support::analysis_intake(tenant_id, version_id, &key, 100, 3)
}

/// Records one analysis intake of `tenant_id` with `express`.
async fn record_in(app: &TestApp, tenant_id: Uuid, express: Option<&Express>) -> Recorded {
    let mut conn = app.pool.get().await.expect("connection");
    let tenant = TenantWrite {
        tenant_id,
        generation: None,
    };
    intake::record(
        &mut conn,
        &tenant,
        &[analysis(tenant_id)],
        express.map(Express::claim),
    )
    .await
    .expect("intake")
    .expect("admitted")
    .remove(0)
}

async fn record(app: &TestApp, express: &Express) -> Recorded {
    record_in(app, app.tenant_id, Some(express)).await
}

/// The event id of the oldest message in the analysis list.
async fn oldest_message(app: &TestApp) -> Option<Uuid> {
    let redis = RedisPool::build(&app.context.settings.redis).expect("redis pool");
    broker::oldest_event_ids(
        &redis,
        &app.context.settings.redis.namespace,
        &[AnalyzeDocument::JOB_TYPE],
    )
    .await
    .expect("read the list")
    .remove(0)
    .1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intake_with_no_backlog_is_published_by_its_own_process() {
    let app = TestApp::spawn().await;
    let express = express_on(&app.context.settings);

    let recorded = record(&app, &express).await;
    let event = recorded
        .announce
        .clone()
        .expect("claimed for the express path");
    assert_eq!(event.id, recorded.job.current_event_id.expect("event"));
    let claimed = event_of(&app, recorded.job.id).await;
    assert_eq!(claimed.status, "PUBLISHING");
    assert!(claimed.claimed_by.is_some_and(|by| by.starts_with("test-")));

    express.publish(event.clone()).await;
    // Marked by the writer of marks a linger after the push, with no flush.
    let published = wait_published(
        &app,
        recorded.job.id,
        "the express event is marked published",
    )
    .await;
    assert_eq!(published.announced_event_id, Some(event.id));
    assert_eq!(
        oldest_message(&app).await,
        Some(event.id),
        "pushed to the queue's list"
    );
}

/// What the API's graceful stop relies on: every event pushed before a flush is
/// `PUBLISHED` when it returns, none left for claim recovery to publish again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_writes_the_mark_of_every_event_pushed_before_it() {
    let app = TestApp::spawn().await;
    let mut settings = app.context.settings.clone();
    settings.scheduling.in_flight_per_queue = 64;
    settings.scheduling.max_running_per_tenant = 64;
    let express = express_on(&settings);
    let mut jobs = Vec::new();
    for _ in 0..3 {
        let recorded = record(&app, &express).await;
        express
            .publish(recorded.announce.expect("below every bound"))
            .await;
        jobs.push(recorded.job.id);
    }
    express.flush().await;
    for job_id in jobs {
        assert_eq!(event_of(&app, job_id).await.status, "PUBLISHED");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_runs_with_no_dispatcher_when_its_queue_is_idle() {
    let app = TestApp::spawn().await;
    let _worker = app.start_worker();

    let (document_id, job_id) = app.upload(b"an express letter").await;

    let job = app.wait_for_job(job_id, JobStatus::Succeeded).await;
    assert_eq!(job.attempts, 1);
    // The mark comes a linger after the push, usually after the job's claim.
    let event = wait_published(&app, job_id, "the express event is marked published").await;
    assert!(event.claimed_by.is_some_and(|by| by.starts_with("api-")));
    let (status, document) = app
        .json_as(
            reqwest::Method::GET,
            &app.token,
            &format!("/api/documents/{document_id}"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(document["status"], "READY");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_due_event_in_the_queue_leaves_the_intake_to_the_scheduler() {
    let app = TestApp::spawn().await;
    let express = express_on(&app.context.settings);
    // Another tenant's job waits in the same queue (no dispatcher runs).
    let (other, _) = app.add_tenant("tenant-b").await;
    let waiting = record_in(&app, other, None).await;
    assert_eq!(event_of(&app, waiting.job.id).await.status, "PENDING");

    let recorded = record(&app, &express).await;

    assert!(
        recorded.announce.is_none(),
        "a backlog goes through the scheduler"
    );
    let event = event_of(&app, recorded.job.id).await;
    assert_eq!(event.status, "PENDING");
    assert_eq!(event.claimed_by, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_flight_bound_and_the_pauses_leave_the_intake_to_the_scheduler() {
    let app = TestApp::spawn().await;
    let mut settings = app.context.settings.clone();
    settings.scheduling.in_flight_per_queue = 2;
    let express = express_on(&settings);

    // Two published and unclaimed (no worker runs): the queue is at its bound.
    for _ in 0..2 {
        let recorded = record(&app, &express).await;
        express
            .publish(recorded.announce.expect("below the bound"))
            .await;
    }
    let third = record(&app, &express).await;
    assert!(
        third.announce.is_none(),
        "the queue is at its in-flight bound"
    );
    assert_eq!(event_of(&app, third.job.id).await.status, "PENDING");

    // Room again (the bound counts in-flight messages), but the tenant is paused.
    let mut wide = app.context.settings.clone();
    wide.scheduling.in_flight_per_queue = 64;
    let wide = express_on(&wide);
    let mut conn = app.pool.get().await.expect("connection");
    diesel::sql_query("DELETE FROM outbox_events WHERE status = 'PENDING'")
        .execute(&mut conn)
        .await
        .expect("clear the backlog");
    pauses::pause_tenant(&mut conn, app.tenant_id)
        .await
        .expect("pause");
    assert!(
        record(&app, &wide).await.announce.is_none(),
        "a paused tenant"
    );
    pauses::resume_tenant(&mut conn, app.tenant_id)
        .await
        .expect("resume");
    diesel::sql_query("DELETE FROM outbox_events WHERE status = 'PENDING'")
        .execute(&mut conn)
        .await
        .expect("clear the backlog");
    assert!(
        record(&app, &wide).await.announce.is_some(),
        "resumed and below every bound"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_express_push_returns_the_event_to_the_dispatchers() {
    let app = TestApp::spawn().await;
    let mut settings = app.context.settings.clone();
    // Nothing listens there: the push fails as with Redis down.
    settings.redis.url = Secret::new(format!("redis://127.0.0.1:{}", test_support::free_port()));
    let express = express_on(&settings);

    let recorded = record(&app, &express).await;
    express
        .publish(recorded.announce.clone().expect("claimed"))
        .await;

    let event = event_of(&app, recorded.job.id).await;
    assert_eq!(event.status, "PENDING");
    assert_eq!(event.claimed_by, None);
    assert_eq!(event.publish_attempts, 1);
    assert_eq!(event.last_error.as_deref(), Some(BROKER_UNAVAILABLE));
    // A dispatcher publishes it after its backoff.
    app.start_dispatcher();
    wait_published(&app, recorded.job.id, "a dispatcher published it").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_at_its_cap_leaves_the_intake_to_the_scheduler() {
    let app = TestApp::spawn().await;
    let mut settings = app.context.settings.clone();
    settings.scheduling.in_flight_per_queue = 64;
    settings.scheduling.max_running_per_tenant = 1;
    let express = express_on(&settings);

    // One in flight (published, no worker): the tenant is at its cap of one.
    let first = record(&app, &express).await;
    express
        .publish(first.announce.expect("below the cap"))
        .await;
    let second = record(&app, &express).await;
    assert!(second.announce.is_none(), "the tenant is at its cap");
    assert_eq!(event_of(&app, second.job.id).await.status, "PENDING");

    // Another tenant of the same queue is below its own cap, but the queue now has a
    // due event (the first tenant's): the fair scheduler decides for it too.
    let (other, _) = app.add_tenant("tenant-b").await;
    assert!(
        record_in(&app, other, Some(&express))
            .await
            .announce
            .is_none()
    );
}
