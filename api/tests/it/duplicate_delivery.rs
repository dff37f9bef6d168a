use quire_shared::broker::{EventMessage, WireMessage};
use quire_shared::db::outbox;
use quire_shared::states::JobStatus;
use uuid::Uuid;

use crate::helpers::TestApp;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_message_delivered_five_times_runs_the_job_once() {
    let app = TestApp::spawn().await;
    let (_, job_id) = app
        .upload(b"the same bytes, delivered again and again")
        .await;
    let mut conn = app.pool.get().await.expect("connection");
    let event = outbox::job_events(&mut conn, job_id)
        .await
        .expect("events")
        .remove(0);

    // One message, pushed five times before any worker runs: five deliveries of it.
    let wire = WireMessage::publish(
        EventMessage::new(event.id, job_id, app.tenant_id, "analyze-document"),
        Uuid::now_v7(),
        time::OffsetDateTime::now_utc(),
    );
    let raw = serde_json::to_string(&wire).expect("serialize");
    for _ in 0..5 {
        app.push_raw("analyze-document", &raw).await;
    }

    // Two workers with several slots each race for the copies.
    let workers = [app.start_worker(), app.start_worker()];
    app.wait_for_job(job_id, JobStatus::Succeeded).await;
    app.wait_until_consumed("analyze-document").await;
    for worker in workers {
        worker.drain().await;
    }

    let job = app.job(job_id).await;
    assert_eq!(job.status, JobStatus::Succeeded);
    assert_eq!(job.attempts, 1, "a duplicate delivery ran the job again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_message_is_dropped_and_the_worker_keeps_working() {
    let app = TestApp::spawn().await;
    for garbage in ["not json", "{\"v\":1}", "{\"v\":99,\"event_id\":1}"] {
        app.push_raw("analyze-document", garbage).await;
    }
    app.start_dispatcher();
    let _worker = app.start_worker();
    let (_, job_id) = app.upload(b"a real document after the garbage").await;
    let job = app.wait_for_job(job_id, JobStatus::Succeeded).await;
    assert_eq!(job.attempts, 1);
}
