use quire_shared::db::outbox;
use quire_shared::states::JobStatus;
use serde_json::Value;

use crate::helpers::TestApp;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_job_can_be_retried_once_and_then_succeeds() {
    let app = TestApp::spawn().await;
    let original = b"the bytes as uploaded".to_vec();
    let (document_id, job_id) = app.upload(&original).await;
    let key = crate::integrity::stored_key(&app, document_id).await;
    app.context
        .overwrite_stored(&key, b"the bytes as damaged!")
        .await;
    app.start_dispatcher();
    let _worker = app.start_worker();
    app.wait_for_job(job_id, JobStatus::Failed).await;

    // Repaired storage, then an authorized retry: a new event and a fresh budget.
    app.context.overwrite_stored(&key, &original).await;
    let retry_path = format!("/api/documents/{document_id}/processing-jobs/{job_id}/retry");
    let response = app.post_as(&app.token, &retry_path).await;
    assert_eq!(response.status(), 202);
    let job = app.wait_for_job(job_id, JobStatus::Succeeded).await;
    assert_eq!(job.attempts, 2);
    assert!(
        job.max_attempts > job.attempts,
        "a retry gets a fresh budget"
    );
    let mut conn = app.pool.get().await.expect("connection");
    assert_eq!(
        outbox::job_events(&mut conn, job_id)
            .await
            .expect("events")
            .len(),
        2
    );
    let document: Value = app
        .get_as(&app.token, &format!("/api/documents/{document_id}"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(
        document["status"], "READY",
        "the retried analysis completed"
    );
    assert_eq!(document["processing_error"], Value::Null);

    // Anything but FAILED answers 409 naming the state it is in.
    let again = app.post_as(&app.token, &retry_path).await;
    assert_eq!(again.status(), 409);
    let problem: Value = again.json().await.expect("json");
    assert_eq!(problem["code"], "job_not_failed");
    assert_eq!(problem["current_status"], "SUCCEEDED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrying_another_documents_job_is_not_found() {
    let app = TestApp::spawn().await;
    let (_, job_id) = app.upload(b"first document").await;
    let (other_document, _) = app.upload(b"second document").await;
    let response = app
        .post_as(
            &app.token,
            &format!("/api/documents/{other_document}/processing-jobs/{job_id}/retry"),
        )
        .await;
    assert_eq!(response.status(), 404);
}
