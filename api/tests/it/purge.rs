use diesel::sql_types::Uuid as SqlUuid;
use diesel_async::RunQueryDsl;
use quire_shared::states::JobStatus;
use serde_json::Value;
use uuid::Uuid;

use crate::helpers::{TestApp, uuid_at};

async fn delete(app: &TestApp, document_id: Uuid) -> reqwest::Response {
    app.http
        .delete(format!("{}/api/documents/{document_id}", app.address))
        .bearer_auth(&app.token)
        .send()
        .await
        .expect("delete")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_trashed_document_purges_its_bytes_and_rows_but_keeps_the_job() {
    let app = TestApp::spawn().await;
    let (document_id, _) = app.upload(b"a document to forget").await;
    // Labels go with it.
    let labelled = app
        .http
        .patch(format!("{}/api/documents/{document_id}", app.address))
        .bearer_auth(&app.token)
        .json(&serde_json::json!({ "tags": ["old"], "correspondent": "Someone" }))
        .send()
        .await
        .expect("patch");
    assert_eq!(labelled.status(), 200);
    let stored = crate::integrity::stored_path(&app, document_id).await;
    assert!(stored.exists());

    let trashed = delete(&app, document_id).await;
    assert_eq!(trashed.status(), 200, "first DELETE trashes");
    let trashed: Value = trashed.json().await.expect("json");
    assert_eq!(trashed["document"]["tags"], serde_json::json!(["old"]));
    assert!(trashed["document"]["trashed_at"].is_string());
    let queued = delete(&app, document_id).await;
    assert_eq!(queued.status(), 202, "second DELETE purges");
    let body: Value = queued.json().await.expect("json");
    assert_eq!(body["job"]["type"], "purge-document");
    let purge_id = uuid_at(&body, "/job/id");
    let again: Value = delete(&app, document_id).await.json().await.expect("json");
    assert_eq!(
        again["job"]["id"],
        purge_id.to_string(),
        "a queued purge is not duplicated"
    );

    app.start_dispatcher();
    let _worker = app.start_worker();
    app.wait_for_job(purge_id, JobStatus::Succeeded).await;
    assert!(!stored.exists(), "the stored bytes are gone");
    assert_eq!(delete(&app, document_id).await.status(), 404);
    let trash: Value = app
        .get_as(&app.token, "/api/documents?trashed=true")
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(trash["documents"].as_array().map(Vec::len), Some(0));
    // The purge's own row outlives the document, as the audit record.
    assert_eq!(app.job(purge_id).await.document_id, Some(document_id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restoring_withdraws_a_purge_that_has_not_started() {
    let app = TestApp::spawn().await;
    let (document_id, _) = app.upload(b"a document deleted by mistake").await;
    delete(&app, document_id).await;
    let queued: Value = delete(&app, document_id).await.json().await.expect("json");
    let purge_id = uuid_at(&queued, "/job/id");

    let restored = app
        .post_as(&app.token, &format!("/api/documents/{document_id}/restore"))
        .await;
    assert_eq!(restored.status(), 200);
    assert_eq!(app.job(purge_id).await.status, JobStatus::Cancelled);
    assert!(
        crate::integrity::stored_path(&app, document_id)
            .await
            .exists()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_for_a_retired_job_type_fails_that_job_and_the_worker_goes_on() {
    let app = TestApp::spawn().await;
    let (job_id, event_id) = (Uuid::now_v7(), Uuid::now_v7());
    let mut conn = app.pool.get().await.expect("connection");
    // As an old release would have written it.
    diesel::sql_query(
        "WITH job AS ( \
             INSERT INTO processing_jobs (id, tenant_id, job_type, payload, status, max_attempts, current_event_id) \
             VALUES ($1, $3, 'generate-thumbnails', '{}', 'QUEUED', 5, $2) RETURNING id) \
         INSERT INTO outbox_events (id, job_id, tenant_id, queue, message, status) \
         SELECT $2, job.id, $3, 'analyze-document', \
                jsonb_build_object('v', 1, 'event_id', $2, 'job_id', job.id, 'tenant_id', $3, \
                                   'job_type', 'generate-thumbnails'), 'PENDING' FROM job",
    )
    .bind::<SqlUuid, _>(job_id)
    .bind::<SqlUuid, _>(event_id)
    .bind::<SqlUuid, _>(app.tenant_id)
    .execute(&mut conn)
    .await
    .expect("insert a retired job");
    app.start_dispatcher();
    let _worker = app.start_worker();
    let job = app.wait_for_job(job_id, JobStatus::Failed).await;
    assert_eq!(job.error_code.as_deref(), Some("retired_job_type"));
    // The worker still works.
    let (_, next) = app.upload(b"the next document").await;
    app.wait_for_job(next, JobStatus::Succeeded).await;
}
