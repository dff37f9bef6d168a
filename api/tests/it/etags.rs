//! Optimistic concurrency: the document and job views carry an `ETag`; `If-None-Match`
//! answers 304 while it holds; `If-Match` on an edit, a trash or a restore applies the
//! write only at that version (412 otherwise, nothing written), checked in the write's
//! own UPDATE, so of concurrent writes from one version exactly one applies. Without
//! `If-Match` everything behaves as before.

use std::sync::Arc;

use reqwest::Method;
use serde_json::{Value, json};
use tokio::sync::Barrier;
use uuid::Uuid;

use crate::helpers::{TestApp, uuid_at};
use quire_shared::states::JobStatus;

/// Writes fired at once from one version.
const AT_ONCE: usize = 6;

/// Sends `method` to `path` with optional JSON and headers; answers status, ETag, body.
async fn send(
    app: &TestApp,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, Option<String>, Value) {
    let mut request = app
        .http
        .request(method, format!("{}{path}", app.address))
        .bearer_auth(&app.token);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let etag = response
        .headers()
        .get("etag")
        .map(|value| value.to_str().expect("ascii").to_owned());
    let text = response.text().await.expect("body");
    (
        status,
        etag,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

async fn document_etag(app: &TestApp, document_id: Uuid) -> String {
    let (status, etag, body) = send(
        app,
        Method::GET,
        &format!("/api/documents/{document_id}"),
        &[],
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    etag.expect("the document view has an ETag")
}

fn assert_precondition_failed(status: u16, body: &Value) {
    assert_eq!(status, 412, "{body}");
    assert_eq!(body["code"], "precondition_failed", "{body}");
    assert_eq!(body["status"], 412, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_answers_304_while_its_etag_holds_and_every_change_gives_a_new_one() {
    let app = TestApp::spawn().await;
    let (document_id, job_id) = app.upload(b"an etag letter").await;
    let path = format!("/api/documents/{document_id}");
    let uploaded = document_etag(&app, document_id).await;

    let (status, etag, body) = send(
        &app,
        Method::GET,
        &path,
        &[("If-None-Match", uploaded.as_str())],
        None,
    )
    .await;
    assert_eq!(status, 304);
    assert_eq!(etag.as_deref(), Some(uploaded.as_str()));
    assert_eq!(body, Value::Null, "a 304 has no body");
    let weak = format!("W/{uploaded}");
    let (status, _, _) = send(
        &app,
        Method::GET,
        &path,
        &[("If-None-Match", weak.as_str())],
        None,
    )
    .await;
    assert_eq!(status, 304, "If-None-Match compares weakly");

    // The worker's PENDING → PROCESSING → READY changes the view: a new ETag.
    app.start_dispatcher();
    let _worker = app.start_worker();
    app.wait_for_job(job_id, JobStatus::Succeeded).await;
    let (status, ready, body) = send(
        &app,
        Method::GET,
        &path,
        &[("If-None-Match", uploaded.as_str())],
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["status"], "READY");
    let ready = ready.expect("etag");
    assert_ne!(ready, uploaded);

    // An edit answers the new ETag; a new title analyzes again, which changes it again.
    let (status, renamed, body) = send(
        &app,
        Method::PATCH,
        &path,
        &[],
        Some(json!({ "title": "Renamed" })),
    )
    .await;
    assert_eq!(status, 200);
    assert_ne!(renamed.expect("the edit answers an ETag"), ready);
    app.wait_for_job(uuid_at(&body, "/job/id"), JobStatus::Succeeded)
        .await;
    let edited = document_etag(&app, document_id).await;
    // Labels change nothing the worker looks at: the edit's ETag is the one a read
    // gives next. Tags alone change it too.
    let (status, tagged, _) = send(
        &app,
        Method::PATCH,
        &path,
        &[],
        Some(json!({ "tags": ["x"] })),
    )
    .await;
    assert_eq!(status, 200);
    let tagged = tagged.expect("etag");
    assert_ne!(tagged, edited);
    let (_, correspondent, _) = send(
        &app,
        Method::PATCH,
        &path,
        &[],
        Some(json!({ "correspondent": "Acme", "tags": ["y"] })),
    )
    .await;
    let correspondent = correspondent.expect("etag");
    assert_ne!(correspondent, tagged);
    assert_eq!(document_etag(&app, document_id).await, correspondent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_answers_304_while_its_view_is_unchanged() {
    let app = TestApp::spawn().await;
    let (document_id, job_id) = app.upload(b"a job etag").await;
    let path = format!("/api/documents/{document_id}/processing-jobs/{job_id}");
    let (status, queued, body) = send(&app, Method::GET, &path, &[], None).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("QUEUED")));
    let queued = queued.expect("the job view has an ETag");
    let (status, etag, body) = send(
        &app,
        Method::GET,
        &path,
        &[("If-None-Match", queued.as_str())],
        None,
    )
    .await;
    assert_eq!(status, 304);
    assert_eq!(etag.as_deref(), Some(queued.as_str()));
    assert_eq!(body, Value::Null);

    app.start_dispatcher();
    let _worker = app.start_worker();
    app.wait_for_job(job_id, JobStatus::Succeeded).await;
    let (status, done, body) = send(
        &app,
        Method::GET,
        &path,
        &[("If-None-Match", queued.as_str())],
        None,
    )
    .await;
    assert_eq!((status, body["status"].as_str()), (200, Some("SUCCEEDED")));
    assert_ne!(done.expect("etag"), queued);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_concurrent_edits_from_one_version_exactly_one_applies() {
    let app = Arc::new(TestApp::spawn().await);
    let (document_id, _) = app.upload(b"edited at once").await;
    let etag = document_etag(&app, document_id).await;
    let barrier = Arc::new(Barrier::new(AT_ONCE));
    let mut tasks = Vec::new();
    for writer in 0..AT_ONCE {
        let (app, barrier, etag) = (app.clone(), barrier.clone(), etag.clone());
        tasks.push(tokio::spawn(async move {
            let path = format!("/api/documents/{document_id}");
            let body = json!({ "title": format!("Writer {writer}") });
            barrier.wait().await;
            let answer = send(
                &app,
                Method::PATCH,
                &path,
                &[("If-Match", etag.as_str())],
                Some(body),
            )
            .await;
            (writer, answer)
        }));
    }
    let mut applied = Vec::new();
    for task in tasks {
        let (writer, (status, etag, body)) = task.await.expect("task");
        if status == 200 {
            applied.push((writer, etag.expect("etag")));
        } else {
            assert_precondition_failed(status, &body);
        }
    }
    assert_eq!(applied.len(), 1, "exactly one edit applies: {applied:?}");
    let (winner, winner_etag) = &applied[0];
    let (_, now, body) = send(
        &app,
        Method::GET,
        &format!("/api/documents/{document_id}"),
        &[],
        None,
    )
    .await;
    assert_eq!(body["title"], format!("Writer {winner}"));
    assert_eq!(now.as_deref(), Some(winner_etag.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_concurrent_trashes_from_one_version_one_trashes_and_none_purges() {
    let app = Arc::new(TestApp::spawn().await);
    let (document_id, _) = app.upload(b"trashed at once").await;
    let etag = document_etag(&app, document_id).await;
    let barrier = Arc::new(Barrier::new(AT_ONCE));
    let mut tasks = Vec::new();
    for _ in 0..AT_ONCE {
        let (app, barrier, etag) = (app.clone(), barrier.clone(), etag.clone());
        tasks.push(tokio::spawn(async move {
            let path = format!("/api/documents/{document_id}");
            barrier.wait().await;
            send(
                &app,
                Method::DELETE,
                &path,
                &[("If-Match", etag.as_str())],
                None,
            )
            .await
        }));
    }
    let mut trashed = Vec::new();
    for task in tasks {
        let (status, etag, body) = task.await.expect("task");
        if status == 200 {
            trashed.push(etag.expect("the trash answers an ETag"));
        } else {
            // Never 202: a DELETE meant for the live version does not purge.
            assert_precondition_failed(status, &body);
        }
    }
    assert_eq!(trashed.len(), 1, "exactly one trash applies");
    // Restore: the stale (live) version is refused, the trash's version restores.
    let restore = format!("/api/documents/{document_id}/restore");
    let (status, _, body) = send(
        &app,
        Method::POST,
        &restore,
        &[("If-Match", etag.as_str())],
        None,
    )
    .await;
    assert_precondition_failed(status, &body);
    let (status, restored, body) = send(
        &app,
        Method::POST,
        &restore,
        &[("If-Match", trashed[0].as_str())],
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["trashed_at"], Value::Null);
    let restored = restored.expect("the restore answers an ETag");
    assert_eq!(document_etag(&app, document_id).await, restored);
    // A purge needs the trashed version too: from the live one it answers 412.
    let (status, trashed_again, _) = send(
        &app,
        Method::DELETE,
        &format!("/api/documents/{document_id}"),
        &[("If-Match", restored.as_str())],
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (status, _, body) = send(
        &app,
        Method::DELETE,
        &format!("/api/documents/{document_id}"),
        &[("If-Match", restored.as_str())],
        None,
    )
    .await;
    assert_precondition_failed(status, &body);
    let trashed_again = trashed_again.expect("etag");
    let (status, _, body) = send(
        &app,
        Method::DELETE,
        &format!("/api/documents/{document_id}"),
        &[("If-Match", trashed_again.as_str())],
        None,
    )
    .await;
    assert_eq!(status, 202, "the trashed version's DELETE purges: {body}");
    assert_eq!(body["job"]["type"], "purge-document");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_or_foreign_if_match_changes_nothing_and_without_it_writes_are_as_before() {
    let app = Arc::new(TestApp::spawn().await);
    let (document_id, _) = app.upload(b"stale tags").await;
    let path = format!("/api/documents/{document_id}");
    let before = document_etag(&app, document_id).await;
    let weak = format!("W/{before}");
    for tag in ["\"0\"", weak.as_str(), "\"not-ours\""] {
        let (status, _, body) = send(
            &app,
            Method::PATCH,
            &path,
            &[("If-Match", tag)],
            Some(json!({ "title": "Never" })),
        )
        .await;
        assert_precondition_failed(status, &body);
    }
    assert_eq!(
        document_etag(&app, document_id).await,
        before,
        "nothing changed"
    );
    let (status, _, body) = send(
        &app,
        Method::PATCH,
        &path,
        &[("If-Match", "*")],
        Some(json!({ "title": "Any version" })),
    )
    .await;
    assert_eq!(
        (status, body["document"]["title"].as_str()),
        (200, Some("Any version"))
    );
    let (status, _, _) = send(
        &app,
        Method::PATCH,
        &format!("/api/documents/{}", Uuid::now_v7()),
        &[("If-Match", "\"1\"")],
        Some(json!({ "title": "Nobody" })),
    )
    .await;
    assert_eq!(
        status, 404,
        "a missing document is missing, whatever the version"
    );

    // Without If-Match, concurrent edits all apply, as before.
    let barrier = Arc::new(Barrier::new(AT_ONCE));
    let mut tasks = Vec::new();
    for writer in 0..AT_ONCE {
        let (app, barrier, path) = (app.clone(), barrier.clone(), path.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            send(
                &app,
                Method::PATCH,
                &path,
                &[],
                Some(json!({ "title": format!("Writer {writer}") })),
            )
            .await
            .0
        }));
    }
    for task in tasks {
        assert_eq!(task.await.expect("task"), 200);
    }
    // And a second DELETE purges.
    let (status, _, _) = send(&app, Method::DELETE, &path, &[], None).await;
    assert_eq!(status, 200);
    let (status, _, body) = send(&app, Method::DELETE, &path, &[], None).await;
    assert_eq!(status, 202, "{body}");
    assert!(!uuid_at(&body, "/job/id").is_nil());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_declares_etags_preconditions_304_and_412() {
    let app = TestApp::spawn().await;
    let spec: Value = app
        .http
        .get(format!("{}/api/openapi.json", app.address))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("json");
    let has_header = |operation: &Value, name: &str| {
        operation["parameters"]
            .as_array()
            .is_some_and(|all| all.iter().any(|p| p["name"] == name && p["in"] == "header"))
    };
    let document = "/api/documents/{document_id}";
    let job = "/api/documents/{document_id}/processing-jobs/{job_id}";
    for (path, method) in [(document, "get"), (job, "get")] {
        let operation = &spec["paths"][path][method];
        assert!(has_header(operation, "If-None-Match"), "{method} {path}");
        assert!(operation["responses"]["304"].is_object(), "{method} {path}");
        assert!(
            operation["responses"]["200"]["headers"]["ETag"].is_object(),
            "{method} {path} declares no ETag"
        );
    }
    let restore = "/api/documents/{document_id}/restore";
    for (path, method) in [(document, "patch"), (document, "delete"), (restore, "post")] {
        let operation = &spec["paths"][path][method];
        assert!(has_header(operation, "If-Match"), "{method} {path}");
        assert!(operation["responses"]["412"].is_object(), "{method} {path}");
        assert!(
            operation["responses"]["200"]["headers"]["ETag"].is_object(),
            "{method} {path} declares no ETag"
        );
    }
}
