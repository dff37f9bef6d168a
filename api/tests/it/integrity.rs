use quire_shared::db::documents;
use quire_shared::states::JobStatus;
use serde_json::Value;
use uuid::Uuid;

use crate::helpers::TestApp;

/// The storage key of the document's current version, as its row names it.
pub async fn stored_key(app: &TestApp, document_id: Uuid) -> String {
    let mut conn = app.pool.get().await.expect("connection");
    let document = documents::find_document(&mut conn, app.tenant_id, document_id)
        .await
        .expect("query")
        .expect("document");
    let version = documents::find_version(
        &mut conn,
        app.tenant_id,
        document_id,
        document.current_version_id.expect("version"),
    )
    .await
    .expect("query")
    .expect("version");
    version.storage_key
}

/// Asserts nothing internal leaks into a client-facing body.
fn assert_safe(app: &TestApp, body: &str) {
    let data_dir = app.context.data_dir.path().to_string_lossy().to_string();
    for leak in [
        data_dir.as_str(),
        "tenants/",
        "/source",
        "/sources/",
        "redis://",
        "SQLSTATE",
        "panicked",
    ] {
        assert!(!body.contains(leak), "body leaks {leak:?}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_object_altered_after_upload_fails_job_and_document_safely() {
    let app = TestApp::spawn().await;
    let (document_id, job_id) = app.upload(b"original bytes of a contract").await;
    // Same length, other bytes: only the checksum can tell.
    app.context
        .overwrite_stored(
            &stored_key(&app, document_id).await,
            b"tampered bytes of a contract",
        )
        .await;

    app.start_dispatcher();
    let _worker = app.start_worker();
    let job = app.wait_for_job(job_id, JobStatus::Failed).await;
    assert_eq!(job.error_code.as_deref(), Some("integrity_mismatch"));
    assert_eq!(job.attempts, 1, "a mismatch is permanent, not retried");

    let view = app
        .get_as(
            &app.token,
            &format!("/api/documents/{document_id}/processing-jobs/{job_id}"),
        )
        .await
        .text()
        .await
        .expect("body");
    assert_safe(&app, &view);
    let view: Value = serde_json::from_str(&view).expect("json");
    assert_eq!(view["status"], "FAILED");
    assert_eq!(view["error_code"], "integrity_mismatch");

    let document = app
        .get_as(&app.token, &format!("/api/documents/{document_id}"))
        .await
        .text()
        .await
        .expect("body");
    assert_safe(&app, &document);
    let document: Value = serde_json::from_str(&document).expect("json");
    assert_eq!(document["status"], "FAILED");
    assert!(
        document["processing_error"]
            .as_str()
            .is_some_and(|text| !text.is_empty())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_stored_object_fails_job_and_document() {
    let app = TestApp::spawn().await;
    let (document_id, job_id) = app.upload(b"bytes that will vanish").await;
    app.context
        .remove_stored(&stored_key(&app, document_id).await)
        .await;

    app.start_dispatcher();
    let _worker = app.start_worker();
    let job = app.wait_for_job(job_id, JobStatus::Failed).await;
    assert_eq!(job.error_code.as_deref(), Some("source_missing"));
    let message = job.error_message.expect("message");
    assert_safe(&app, &message);
}

/// `verify-document` through the bulk action: an intact document keeps its status, an
/// altered one ends `FAILED`, and a second request while one is queued returns it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_verify_leaves_intact_documents_alone_and_fails_altered_ones() {
    let app = TestApp::spawn().await;
    let (intact, first_analysis) = app.upload(b"a receipt that stays as it was").await;
    let (altered, second_analysis) = app.upload(b"a receipt that will be altered").await;
    app.start_dispatcher();
    let _worker = app.start_worker();
    app.wait_for_job(first_analysis, JobStatus::Succeeded).await;
    app.wait_for_job(second_analysis, JobStatus::Succeeded)
        .await;
    let status_of = |id: Uuid| {
        let app = &app;
        async move {
            let body: Value = app
                .get_as(&app.token, &format!("/api/documents/{id}"))
                .await
                .json()
                .await
                .expect("json");
            body["status"].as_str().unwrap_or_default().to_owned()
        }
    };
    let intact_status = status_of(intact).await;
    app.context
        .overwrite_stored(
            &stored_key(&app, altered).await,
            b"a receipt that WILL be altered",
        )
        .await;

    let (status, body) = app
        .json_as(
            reqwest::Method::POST,
            &app.token,
            "/api/documents/verify",
            Some(serde_json::json!({ "ids": [intact, altered, Uuid::now_v7()] })),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let results = body["results"].as_array().expect("results");
    assert_eq!(results[2]["error"], "not_found");
    let job_of = |index: usize| crate::helpers::uuid_at(&results[index], "/job/id");
    assert_eq!(results[0]["job"]["type"], "verify-document");

    let ok = app.wait_for_job(job_of(0), JobStatus::Succeeded).await;
    assert_eq!(ok.document_id, Some(intact));
    let failed = app.wait_for_job(job_of(1), JobStatus::Failed).await;
    assert_eq!(failed.error_code.as_deref(), Some("integrity_mismatch"));
    assert_eq!(
        status_of(intact).await,
        intact_status,
        "verify changes nothing on success"
    );
    assert_eq!(status_of(altered).await, "FAILED");
}
