use serde_json::Value;
use uuid::Uuid;

use crate::helpers::TestApp;

/// A problem body without its per-request id.
async fn problem(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let mut body: Value = response.json().await.expect("json");
    body.as_object_mut().expect("object").remove("request_id");
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenant_cannot_see_a_document_or_its_jobs() {
    let app = TestApp::spawn().await;
    let (document_id, job_id) = app.upload(b"tenant a's private letter").await;
    let (_, token_b) = app.add_tenant("tenant-b").await;
    let unknown = Uuid::now_v7();

    for path in [
        format!("/api/documents/{document_id}"),
        format!("/api/documents/{document_id}/processing-jobs"),
        format!("/api/documents/{document_id}/processing-jobs/{job_id}"),
    ] {
        let theirs = problem(app.get_as(&token_b, &path).await).await;
        let missing = problem(
            app.get_as(
                &token_b,
                &path.replace(&document_id.to_string(), &unknown.to_string()),
            )
            .await,
        )
        .await;
        assert_eq!(theirs.0, 404, "{path}");
        assert_eq!(
            theirs, missing,
            "{path}: another tenant's row must look like a missing one"
        );
    }

    // The owner still sees it, and a job of another document is not this document's.
    let own = app
        .get_as(&app.token, &format!("/api/documents/{document_id}"))
        .await;
    assert_eq!(own.status(), 200);
    let (other_document, _) = app.upload(b"another document of tenant a").await;
    let crossed = app
        .get_as(
            &app.token,
            &format!("/api/documents/{other_document}/processing-jobs/{job_id}"),
        )
        .await;
    assert_eq!(crossed.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_id_answers_like_a_missing_one() {
    let app = TestApp::spawn().await;
    let malformed = problem(app.get_as(&app.token, "/api/documents/not-a-uuid").await).await;
    let missing = problem(
        app.get_as(&app.token, &format!("/api/documents/{}", Uuid::now_v7()))
            .await,
    )
    .await;
    assert_eq!(malformed, missing);
}
