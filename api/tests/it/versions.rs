//! Document versions end to end: a new version is received as any upload is, analyzed
//! while the previous one stays current and searchable, and made current by its
//! analysis's success (never when a newer one is current already); a failed one is
//! listed as failed; every version is downloadable; concurrent uploads get distinct
//! numbers; a version sent again with its Idempotency-Key is recorded once; the document
//! is announced ready when a version becomes current, and failed only when its current
//! version failed; purge and tenant deletion remove every version's objects.

use std::sync::Arc;

use quire_shared::signing::DeletionAction;
use quire_shared::states::JobStatus;
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use tokio::sync::Barrier;
use uuid::Uuid;

use crate::helpers::{TestApp, uuid_at};

async fn post_version(
    app: &TestApp,
    token: &str,
    document_id: Uuid,
    bytes: Vec<u8>,
) -> reqwest::Response {
    let form = Form::new().part(
        "file",
        Part::bytes(bytes)
            .file_name("draft.txt")
            .mime_str("text/plain")
            .expect("mime"),
    );
    app.http
        .post(format!(
            "{}/api/documents/{document_id}/versions",
            app.address
        ))
        .bearer_auth(token)
        .multipart(form)
        .send()
        .await
        .expect("version upload")
}

/// Uploads a new version of a document of tenant A: (version id, job id).
async fn new_version(app: &TestApp, document_id: Uuid, bytes: &[u8]) -> (Uuid, Uuid) {
    let response = post_version(app, &app.token, document_id, bytes.to_vec()).await;
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.expect("json");
    (uuid_at(&body, "/version/id"), uuid_at(&body, "/job/id"))
}

async fn versions(app: &TestApp, document_id: Uuid) -> Vec<Value> {
    let (status, body) = app
        .json_as(
            Method::GET,
            &app.token,
            &format!("/api/documents/{document_id}/versions"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["versions"].as_array().cloned().unwrap_or_default()
}

/// The listing's entry of one version.
fn entry(listed: &[Value], version_id: Uuid) -> Value {
    listed
        .iter()
        .find(|entry| entry["id"] == version_id.to_string())
        .cloned()
        .unwrap_or_else(|| panic!("version {version_id} not listed in {listed:?}"))
}

async fn search(app: &TestApp, q: &str) -> Vec<String> {
    let (status, body) = app
        .json_as(
            Method::GET,
            &app.token,
            &format!("/api/documents/search?q={q}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["documents"]
        .as_array()
        .map(|hits| {
            hits.iter()
                .filter_map(|hit| hit["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

async fn bytes_at(app: &TestApp, path: &str) -> Vec<u8> {
    let response = app.get_as(&app.token, path).await;
    assert_eq!(response.status(), 200, "{path}");
    response.bytes().await.expect("body").to_vec()
}

async fn document(app: &TestApp, document_id: Uuid) -> Value {
    app.json_as(
        Method::GET,
        &app.token,
        &format!("/api/documents/{document_id}"),
        None,
    )
    .await
    .1
}

/// The storage key of a version, as its row holds it.
async fn version_key(app: &TestApp, document_id: Uuid, version_id: Uuid) -> String {
    let mut conn = app.pool.get().await.expect("connection");
    quire_shared::db::documents::find_version(&mut conn, app.tenant_id, document_id, version_id)
        .await
        .expect("query")
        .expect("version")
        .storage_key
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_version_becomes_current_only_when_its_analysis_succeeds() {
    let app = TestApp::spawn().await;
    let first = b"the first draft of the lease names an aardvark".to_vec();
    let second = b"the second draft of the lease names a pangolin instead".to_vec();
    let (document_id, first_job) = app.upload(&first).await;
    app.start_dispatcher();
    let worker = app.start_worker();
    app.wait_for_job(first_job, JobStatus::Succeeded).await;
    // No worker while the new version waits: what readers see meanwhile is the old one.
    worker.drain().await;

    let (second_id, second_job) = new_version(&app, document_id, &second).await;
    let listed = versions(&app, document_id).await;
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(listed[0]["id"], second_id.to_string(), "newest first");
    assert_eq!(listed[0]["number"], 2);
    assert_eq!(listed[0]["status"], "PENDING");
    assert_eq!(listed[0]["current"], false);
    assert_eq!(listed[0]["size_bytes"], second.len());
    assert_eq!(listed[0]["sha256"], hex::encode(Sha256::digest(&second)));
    assert!(listed[0]["created_at"].is_string());
    assert_eq!(listed[1]["number"], 1);
    assert_eq!(listed[1]["status"], "READY");
    assert_eq!(listed[1]["current"], true);
    let shown = document(&app, document_id).await;
    assert_eq!(shown["status"], "READY", "{shown}");
    assert_eq!(shown["current_version"]["number"], 1);
    assert_eq!(search(&app, "aardvark").await, [document_id.to_string()]);
    assert!(search(&app, "pangolin").await.is_empty());
    let content = format!("/api/documents/{document_id}/content");
    assert_eq!(bytes_at(&app, &content).await, first);
    let second_content = format!("/api/documents/{document_id}/versions/{second_id}/content");
    assert_eq!(
        bytes_at(&app, &second_content).await,
        second,
        "a pending version downloads"
    );

    let _worker = app.start_worker();
    app.wait_for_job(second_job, JobStatus::Succeeded).await;
    let shown = document(&app, document_id).await;
    assert_eq!(shown["status"], "READY");
    assert_eq!(shown["current_version"]["id"], second_id.to_string());
    assert_eq!(search(&app, "pangolin").await, [document_id.to_string()]);
    assert!(
        search(&app, "aardvark").await.is_empty(),
        "the index follows the current version"
    );
    assert_eq!(bytes_at(&app, &content).await, second);
    let listed = versions(&app, document_id).await;
    assert_eq!(
        (listed[0]["status"].as_str(), listed[0]["current"].as_bool()),
        (Some("READY"), Some(true))
    );
    assert_eq!(
        (listed[1]["status"].as_str(), listed[1]["current"].as_bool()),
        (Some("READY"), Some(false))
    );
    let first_id = uuid_at(&listed[1], "/id");
    let first_content = format!("/api/documents/{document_id}/versions/{first_id}/content");
    assert_eq!(
        bytes_at(&app, &first_content).await,
        first,
        "an older version downloads"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_version_is_listed_failed_and_an_older_one_analyzed_late_never_becomes_current() {
    let app = TestApp::spawn().await;
    // A tag ruled by each version's animal: the labels must follow the current version.
    for animal in ["wombat", "narwhal", "okapi"] {
        let (status, body) = app
            .json_as(
                Method::POST,
                &app.token,
                "/api/tags",
                Some(json!({ "name": animal, "rule": { "algorithm": "any", "text": animal } })),
            )
            .await;
        assert_eq!(status, 201, "{body}");
    }
    let (document_id, first_job) = app.upload(b"version one speaks of a wombat").await;
    app.start_dispatcher();
    let worker = app.start_worker();
    app.wait_for_job(first_job, JobStatus::Succeeded).await;
    worker.drain().await;

    // Version 2's stored bytes are altered before its analysis: it fails for good.
    let second = b"version two speaks of a narwhal".to_vec();
    let (second_id, second_job) = new_version(&app, document_id, &second).await;
    let second_key = version_key(&app, document_id, second_id).await;
    app.context
        .overwrite_stored(&second_key, b"version two speaks of a NARWHAL")
        .await;
    let worker = app.start_worker();
    let failed = app.wait_for_job(second_job, JobStatus::Failed).await;
    assert_eq!(failed.error_code.as_deref(), Some("integrity_mismatch"));
    let listed = versions(&app, document_id).await;
    let entry2 = entry(&listed, second_id);
    assert_eq!(entry2["status"], "FAILED", "{listed:?}");
    assert_eq!(entry2["current"], false);
    assert!(entry2["processing_error"].is_string());
    let shown = document(&app, document_id).await;
    assert_eq!(
        shown["status"], "READY",
        "the previous version stays current: {shown}"
    );
    assert_eq!(shown["current_version"]["number"], 1);
    assert_eq!(search(&app, "wombat").await, [document_id.to_string()]);

    // Version 3 becomes current; then version 2, repaired and retried, succeeds last.
    let (third_id, third_job) =
        new_version(&app, document_id, b"version three speaks of an okapi").await;
    app.wait_for_job(third_job, JobStatus::Succeeded).await;
    assert_eq!(
        document(&app, document_id).await["current_version"]["id"],
        third_id.to_string()
    );
    app.context.overwrite_stored(&second_key, &second).await;
    let (status, body) = app
        .json_as(
            Method::POST,
            &app.token,
            &format!("/api/documents/{document_id}/processing-jobs/{second_job}/retry"),
            None,
        )
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(
        document(&app, document_id).await["status"],
        "READY",
        "retrying an older version's analysis leaves the document alone"
    );
    app.wait_for_job(second_job, JobStatus::Succeeded).await;
    worker.drain().await;

    let shown = document(&app, document_id).await;
    assert_eq!(shown["status"], "READY");
    assert_eq!(
        shown["current_version"]["id"],
        third_id.to_string(),
        "an older version finishing last does not become current"
    );
    assert_eq!(search(&app, "okapi").await, [document_id.to_string()]);
    assert!(search(&app, "narwhal").await.is_empty());
    assert_eq!(
        shown["tags"],
        json!(["okapi"]),
        "an older version analyzed late labels nothing: {shown}"
    );
    let listed = versions(&app, document_id).await;
    let entry2 = entry(&listed, second_id);
    assert_eq!(
        (entry2["status"].as_str(), entry2["current"].as_bool()),
        (Some("READY"), Some(false))
    );
    assert_eq!(entry(&listed, third_id)["current"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_uploaded_at_once_each_get_their_own_number() {
    const UPLOADS: usize = 8;
    let app = Arc::new(TestApp::spawn().await);
    let (document_id, _) = app.upload(b"the original of a contested will").await;
    let barrier = Arc::new(Barrier::new(UPLOADS));
    let mut tasks = Vec::new();
    for index in 0..UPLOADS {
        let (app, barrier) = (app.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let bytes = format!("amendment number {index} to the will").into_bytes();
            let response = post_version(&app, &app.token, document_id, bytes).await;
            let status = response.status().as_u16();
            let body: Value = response.json().await.expect("json");
            (status, body)
        }));
    }
    let mut numbers = Vec::new();
    for task in tasks {
        let (status, body) = task.await.expect("upload task");
        assert_eq!(status, 201, "{body}");
        numbers.push(body["version"]["number"].as_i64().expect("number"));
    }
    numbers.sort_unstable();
    let expected: Vec<i64> = (2..=i64::try_from(UPLOADS).expect("small") + 1).collect();
    assert_eq!(numbers, expected, "distinct, gapless numbers");
    let listed = versions(&app, document_id).await;
    assert_eq!(listed.len(), UPLOADS + 1);
    assert_eq!(
        document(&app, document_id).await["current_version"]["number"],
        1,
        "none is current before its analysis"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_version_takes_the_upload_rules_and_a_trashed_document_refuses_one() {
    let app = TestApp::spawn().await;
    let original = b"the minutes of the annual meeting".to_vec();
    let (document_id, _) = app.upload(&original).await;
    let stored_before = app.context.stored_keys().await.len();

    // The same bytes as a live document's current version: the upload's duplicate rule.
    let response = post_version(&app, &app.token, document_id, original.clone()).await;
    assert_eq!(response.status(), 409);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["code"], "duplicate_document");
    assert_eq!(body["existing_document_id"], document_id.to_string());
    // An empty file, a type outside the allowlist, a title part.
    let response = post_version(&app, &app.token, document_id, Vec::new()).await;
    assert_eq!(response.status(), 422);
    let response = post_version(
        &app,
        &app.token,
        document_id,
        b"PK\x03\x04\x14\x00\x00\x00\x08\x00".to_vec(),
    )
    .await;
    assert_eq!(response.status(), 415);
    let form = Form::new()
        .part(
            "file",
            Part::bytes(b"a retitled draft".to_vec()).file_name("a.txt"),
        )
        .text("title", "a new title");
    let response = app
        .http
        .post(format!(
            "{}/api/documents/{document_id}/versions",
            app.address
        ))
        .bearer_auth(&app.token)
        .multipart(form)
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 400);
    // Another tenant's document is not found; an unknown version neither.
    let (_, other) = app.add_tenant("tenant-b").await;
    let response = post_version(&app, &other, document_id, b"a stranger's draft".to_vec()).await;
    assert_eq!(response.status(), 404);
    let (status, _) = app
        .json_as(
            Method::GET,
            &other,
            &format!("/api/documents/{document_id}/versions"),
            None,
        )
        .await;
    assert_eq!(status, 404);
    let response = app
        .get_as(
            &app.token,
            &format!(
                "/api/documents/{document_id}/versions/{}/content",
                Uuid::now_v7()
            ),
        )
        .await;
    assert_eq!(response.status(), 404);

    let (status, _) = app
        .json_as(
            Method::DELETE,
            &app.token,
            &format!("/api/documents/{document_id}"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    let response = post_version(
        &app,
        &app.token,
        document_id,
        b"a draft for the trash".to_vec(),
    )
    .await;
    assert_eq!(response.status(), 409);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["code"], "document_trashed", "{body}");
    assert_eq!(
        app.context.stored_keys().await.len(),
        stored_before,
        "no refused version left an object behind"
    );
    assert_eq!(versions_count(&app, document_id).await, 1);
}

async fn versions_count(app: &TestApp, document_id: Uuid) -> i64 {
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::Int8)]
        count: i64,
    }
    use diesel_async::RunQueryDsl;
    let mut conn = app.pool.get().await.expect("connection");
    diesel::sql_query("SELECT count(*) AS count FROM document_versions WHERE document_id = $1")
        .bind::<diesel::sql_types::Uuid, _>(document_id)
        .get_result::<Count>(&mut conn)
        .await
        .expect("count")
        .count
}

/// A document of tenant A with two analyzed versions: (document id, its objects).
async fn two_analyzed_versions(app: &TestApp) -> (Uuid, Vec<String>) {
    let (document_id, first_job) = app.upload(b"the first survey of the orchard").await;
    app.wait_for_job(first_job, JobStatus::Succeeded).await;
    let (_, second_job) = new_version(app, document_id, b"the second survey of the orchard").await;
    app.wait_for_job(second_job, JobStatus::Succeeded).await;
    let under = format!("tenants/{}/", app.tenant_id);
    let objects: Vec<String> = app
        .context
        .stored_keys()
        .await
        .into_iter()
        .filter(|key| key.starts_with(&under))
        .collect();
    // Two sources, and a thumbnail and a text of each version.
    assert_eq!(objects.len(), 6, "{objects:?}");
    (document_id, objects)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purging_a_document_removes_every_version_and_asset() {
    let app = TestApp::spawn().await;
    app.start_dispatcher();
    let _worker = app.start_worker();
    let (document_id, objects) = two_analyzed_versions(&app).await;

    let path = format!("/api/documents/{document_id}");
    let (status, _) = app.json_as(Method::DELETE, &app.token, &path, None).await;
    assert_eq!(status, 200);
    let (status, body) = app.json_as(Method::DELETE, &app.token, &path, None).await;
    assert_eq!(status, 202, "{body}");
    app.wait_for_job(uuid_at(&body, "/job/id"), JobStatus::Succeeded)
        .await;
    for key in &objects {
        assert!(!app.context.is_stored(key).await, "{key} is left");
    }
    assert_eq!(versions_count(&app, document_id).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_tenant_removes_every_version_and_asset() {
    let app = TestApp::spawn().await;
    app.start_dispatcher();
    let _worker = app.start_worker();
    let (document_id, objects) = two_analyzed_versions(&app).await;

    let request = crate::tenant_deletion::sign(
        &app,
        app.tenant_id,
        "tenant-a",
        DeletionAction::Delete,
        true,
        None,
        OffsetDateTime::now_utc(),
    );
    let (status, body) = crate::tenant_deletion::submit(&app, app.tenant_id, &request).await;
    assert_eq!(status, 202, "{body}");
    app.wait_for_job(uuid_at(&body, "/job/id"), JobStatus::Succeeded)
        .await;
    for key in &objects {
        assert!(!app.context.is_stored(key).await, "{key} is left");
    }
    assert_eq!(versions_count(&app, document_id).await, 0);
}

/// A new version sent with an `Idempotency-Key`: status, headers, body.
async fn post_version_with_key(
    app: &TestApp,
    document_id: Uuid,
    key: &str,
    bytes: &[u8],
) -> (u16, reqwest::header::HeaderMap, Value) {
    let form = Form::new().part(
        "file",
        Part::bytes(bytes.to_vec())
            .file_name("amendment.txt")
            .mime_str("text/plain")
            .expect("mime"),
    );
    let response = app
        .http
        .post(format!(
            "{}/api/documents/{document_id}/versions",
            app.address
        ))
        .bearer_auth(&app.token)
        .header("Idempotency-Key", key)
        .multipart(form)
        .send()
        .await
        .expect("version upload");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, headers, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_version_sent_at_once_with_one_key_is_recorded_once_and_keeps_one_object() {
    // More than one is a race; each waits for the first on an API connection.
    const AT_ONCE: usize = 4;
    let app = Arc::new(TestApp::spawn().await);
    let (document_id, _) = app.upload(b"the lease as first signed").await;
    let (other_document, _) = app.upload(b"another lease entirely").await;
    let amended = b"the lease as amended in spring".to_vec();
    let barrier = Arc::new(Barrier::new(AT_ONCE));
    let mut tasks = Vec::new();
    for _ in 0..AT_ONCE {
        let (app, barrier, amended) = (app.clone(), barrier.clone(), amended.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            post_version_with_key(&app, document_id, "amend-1", &amended).await
        }));
    }
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.expect("task"));
    }
    let first = answers[0].2.clone();
    for (status, _, body) in &answers {
        assert_eq!(*status, 201, "{body}");
        assert_eq!(body, &first, "every answer is the first one");
    }
    let replays = answers
        .iter()
        .filter(|(_, headers, _)| {
            headers
                .get("idempotent-replayed")
                .is_some_and(|value| value == "true")
        })
        .count();
    assert_eq!(replays, AT_ONCE - 1, "all but the first are replays");
    assert_eq!(first["version"]["number"], 2);
    assert_eq!(versions_count(&app, document_id).await, 2);
    // Two documents' sources and the one recorded version's; the replays' are gone.
    let stored = app.context.stored_keys().await;
    assert_eq!(stored.len(), 3, "{stored:?}");

    // The key with other bytes, or with the same bytes for another document: refused.
    let (status, _, body) =
        post_version_with_key(&app, document_id, "amend-1", b"the lease amended twice").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("idempotency_key_reused")),
        "{body}"
    );
    let (status, _, body) = post_version_with_key(&app, other_document, "amend-1", &amended).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("idempotency_key_reused")),
        "{body}"
    );
    assert_eq!(versions_count(&app, document_id).await, 2);
    assert_eq!(versions_count(&app, other_document).await, 1);
    assert_eq!(
        app.context.stored_keys().await.len(),
        3,
        "nothing refused is kept"
    );
}

/// The tenant's announcements in order: (type, the version a `document.ready` names).
async fn announcements(app: &TestApp) -> Vec<(String, Option<String>)> {
    #[derive(diesel::QueryableByName)]
    struct Announced {
        #[diesel(sql_type = diesel::sql_types::Text)]
        event_type: String,
        #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
        version_id: Option<String>,
    }
    use diesel_async::RunQueryDsl;
    let mut conn = app.pool.get().await.expect("connection");
    diesel::sql_query(
        "SELECT event_type, payload ->> 'document_version_id' AS version_id \
         FROM tenant_events WHERE tenant_id = $1 ORDER BY id",
    )
    .bind::<diesel::sql_types::Uuid, _>(app.tenant_id)
    .load::<Announced>(&mut conn)
    .await
    .expect("announcements")
    .into_iter()
    .map(|announced| (announced.event_type, announced.version_id))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_is_announced_ready_as_each_version_becomes_current_and_never_failed_for_a_newer_one()
 {
    let app = TestApp::spawn().await;
    let (document_id, first_job) = app.upload(b"the first plan of the garden shed").await;
    app.start_dispatcher();
    let worker = app.start_worker();
    app.wait_for_job(first_job, JobStatus::Succeeded).await;
    let first_id = uuid_at(&document(&app, document_id).await, "/current_version/id");
    let (second_id, second_job) =
        new_version(&app, document_id, b"the second plan of the garden shed").await;
    app.wait_for_job(second_job, JobStatus::Succeeded).await;
    worker.drain().await;

    // Version 3's stored bytes are altered before its analysis: it fails for good, while
    // version 2 stays current and the document READY.
    let (third_id, third_job) =
        new_version(&app, document_id, b"the third plan of the garden shed").await;
    let third_key = version_key(&app, document_id, third_id).await;
    app.context
        .overwrite_stored(&third_key, b"THE THIRD plan of the garden shed")
        .await;
    let _worker = app.start_worker();
    app.wait_for_job(third_job, JobStatus::Failed).await;
    assert_eq!(document(&app, document_id).await["status"], "READY");

    let ready = |version: Uuid| ("document.ready".to_owned(), Some(version.to_string()));
    assert_eq!(
        announcements(&app).await,
        [
            ready(first_id),
            ready(second_id),
            ("job.failed".to_owned(), None)
        ],
        "ready once per version made current; a newer version's failure is the job's only"
    );
}
