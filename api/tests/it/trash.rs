use quire_shared::broker::{EventMessage, WireMessage};
use quire_shared::db::outbox;
use quire_shared::states::{EventStatus, JobStatus};
use serde_json::Value;
use uuid::Uuid;

use crate::helpers::TestApp;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trashing_cancels_queued_work_and_a_late_message_does_nothing() {
    let app = TestApp::spawn().await;
    let (document_id, job_id) = app.upload(b"a document trashed at once").await;
    let mut conn = app.pool.get().await.expect("connection");
    let event = outbox::job_events(&mut conn, job_id)
        .await
        .expect("events")
        .remove(0);

    let response = app
        .http
        .delete(format!("{}/api/documents/{document_id}", app.address))
        .bearer_auth(&app.token)
        .send()
        .await
        .expect("trash");
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["cancelled_jobs"], 1);

    let job = app.job(job_id).await;
    assert_eq!(job.status, JobStatus::Cancelled);
    // An event still in the outbox is cancelled with its job; one the API had already
    // published itself (the express path: nothing else was queued) stays published, and
    // its message is a late one like the one pushed below.
    let events = outbox::job_events(&mut conn, job_id).await.expect("events");
    assert!(
        matches!(
            events[0].status,
            EventStatus::Cancelled | EventStatus::Published
        ),
        "the event is out of the outbox: {:?}",
        events[0].status
    );
    let gone = app
        .get_as(&app.token, &format!("/api/documents/{document_id}"))
        .await;
    assert_eq!(
        gone.status(),
        404,
        "a trashed document disappears from reads"
    );

    // A message that was already on its way claims nothing.
    let wire = WireMessage::publish(
        EventMessage::new(event.id, job_id, app.tenant_id, "analyze-document"),
        Uuid::now_v7(),
        time::OffsetDateTime::now_utc(),
    );
    app.context
        .push_raw(
            "analyze-document",
            &serde_json::to_string(&wire).expect("json"),
        )
        .await;
    let worker = app.start_worker();
    app.context.wait_until_consumed("analyze-document").await;
    worker.drain().await;
    let job = app.job(job_id).await;
    assert_eq!((job.status, job.attempts), (JobStatus::Cancelled, 0));

    // Restore brings the document back; its jobs stay cancelled.
    let restored = app
        .post_as(&app.token, &format!("/api/documents/{document_id}/restore"))
        .await;
    assert_eq!(restored.status(), 200);
    let back = app
        .get_as(&app.token, &format!("/api/documents/{document_id}"))
        .await;
    assert_eq!(back.status(), 200);
    assert_eq!(app.job(job_id).await.status, JobStatus::Cancelled);
    let again = app
        .post_as(&app.token, &format!("/api/documents/{document_id}/restore"))
        .await;
    assert_eq!(again.status(), 409);
}
