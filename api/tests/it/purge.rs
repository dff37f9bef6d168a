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
    // Labels go with it, and the record of a tag its user took off.
    for labels in [
        serde_json::json!({ "tags": ["old", "gone"], "correspondent": "Someone" }),
        serde_json::json!({ "tags": ["old"] }),
    ] {
        let labelled = app
            .http
            .patch(format!("{}/api/documents/{document_id}", app.address))
            .bearer_auth(&app.token)
            .json(&labels)
            .send()
            .await
            .expect("patch");
        assert_eq!(labelled.status(), 200);
    }
    let stored = crate::integrity::stored_key(&app, document_id).await;
    assert!(app.context.is_stored(&stored).await);

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
    assert!(
        !app.context.is_stored(&stored).await,
        "the stored bytes are gone"
    );
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
    let stored = crate::integrity::stored_key(&app, document_id).await;
    assert!(app.context.is_stored(&stored).await);
}
