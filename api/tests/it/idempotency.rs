//! `Idempotency-Key` on the creating POSTs: the same request with the same key —
//! concurrently or later — gets the first answer and creates nothing new; the same key
//! with another request answers 422; a bad key 400; a replayed upload keeps no object.

use std::sync::Arc;

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use quire_shared::states::JobStatus;
use quire_shared::test_support::{DEADLINE, TestContext, eventually};
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};
use tokio::sync::Barrier;
use uuid::Uuid;

use crate::helpers::{TestApp, uuid_at};

/// Requests fired at once with one key: more than one is a race, and each holds an API
/// connection while it waits for the first (the test pool has ten).
const AT_ONCE: usize = 6;

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    count: i64,
}

async fn count(app: &TestApp, sql: &str, tenant_id: Uuid) -> i64 {
    let mut conn = app.pool.get().await.expect("connection");
    diesel::sql_query(sql)
        .bind::<SqlUuid, _>(tenant_id)
        .get_result::<Count>(&mut conn)
        .await
        .expect("count")
        .count
}

async fn documents_of(app: &TestApp, tenant_id: Uuid) -> i64 {
    count(
        app,
        "SELECT count(*) AS count FROM documents WHERE tenant_id = $1",
        tenant_id,
    )
    .await
}

async fn jobs_of(app: &TestApp, tenant_id: Uuid, job_type: &str) -> i64 {
    let mut conn = app.pool.get().await.expect("connection");
    diesel::sql_query(
        "SELECT count(*) AS count FROM processing_jobs WHERE tenant_id = $1 AND job_type = $2",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<Text, _>(job_type)
    .get_result::<Count>(&mut conn)
    .await
    .expect("count")
    .count
}

/// An upload with `key` (any bytes as the header value); answers status, headers, body.
async fn upload_with_key(
    app: &TestApp,
    token: &str,
    key: &[u8],
    bytes: &[u8],
    title: &str,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let form = Form::new().text("title", title.to_owned()).part(
        "file",
        Part::bytes(bytes.to_vec())
            .file_name("note.txt")
            .mime_str("text/plain")
            .expect("mime"),
    );
    let response = app
        .http
        .post(format!("{}/api/documents", app.address))
        .bearer_auth(token)
        .header(
            "Idempotency-Key",
            reqwest::header::HeaderValue::from_bytes(key).expect("header value"),
        )
        .multipart(form)
        .send()
        .await
        .expect("upload");
    answer(response).await
}

async fn answer(response: reqwest::Response) -> (u16, reqwest::header::HeaderMap, Value) {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.expect("body");
    (
        status,
        headers,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

async fn post_json_with_key(
    app: &TestApp,
    token: &str,
    path: &str,
    key: &str,
    body: &Value,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let response = app
        .http
        .post(format!("{}{path}", app.address))
        .bearer_auth(token)
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
        .expect("post");
    answer(response).await
}

fn replayed(headers: &reqwest::header::HeaderMap) -> bool {
    headers
        .get("idempotent-replayed")
        .is_some_and(|value| value == "true")
}

fn assert_problem(status: u16, body: &Value, expected_status: u16, code: &str) {
    assert_eq!(status, expected_status, "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["status"], expected_status, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_upload_sent_at_once_with_one_key_records_one_document_and_keeps_one_object() {
    let mut context = TestContext::new().await;
    // Without keys these uploads would each record a document of their own.
    context.settings.server.reject_duplicate_uploads = false;
    let app = Arc::new(TestApp::spawn_in(context).await);
    let barrier = Arc::new(Barrier::new(AT_ONCE));
    let mut tasks = Vec::new();
    for _ in 0..AT_ONCE {
        let (app, barrier) = (app.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            upload_with_key(&app, &app.token, b"upload-1", b"the same letter", "Letter").await
        }));
    }
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.expect("task"));
    }
    let (_, _, first) = &answers[0];
    let document_id = uuid_at(first, "/document/id");
    for (status, headers, body) in &answers {
        assert_eq!(*status, 201, "{body}");
        assert_eq!(body, first, "every answer is the first one");
        assert_eq!(
            headers["location"],
            format!("/api/documents/{document_id}").as_str()
        );
    }
    let replays = answers
        .iter()
        .filter(|(_, headers, _)| replayed(headers))
        .count();
    assert_eq!(replays, AT_ONCE - 1, "all but the first are replays");
    assert_eq!(documents_of(&app, app.tenant_id).await, 1);
    assert_eq!(jobs_of(&app, app.tenant_id, "analyze-document").await, 1);
    // Each replay streamed its bytes too; only the recorded document's object is kept.
    let stored = app.context.stored_keys().await;
    assert_eq!(stored.len(), 1, "{stored:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_upload_gets_the_first_answer_later_and_keys_are_per_tenant() {
    let app = TestApp::spawn().await;
    let (status, headers, first) =
        upload_with_key(&app, &app.token, b"retry-me", b"a receipt", "Receipt").await;
    assert_eq!(status, 201, "{first}");
    assert!(!replayed(&headers));
    let (status, headers, again) =
        upload_with_key(&app, &app.token, b"retry-me", b"a receipt", "Receipt").await;
    assert_eq!(
        status, 201,
        "the retry is not a duplicate_document: {again}"
    );
    assert!(replayed(&headers));
    assert_eq!(again, first);
    assert_eq!(documents_of(&app, app.tenant_id).await, 1);
    assert_eq!(app.context.stored_keys().await.len(), 1);

    // Another tenant's same key is its own.
    let (tenant_b, token_b) = app.add_tenant("tenant-b").await;
    let (status, headers, other) =
        upload_with_key(&app, &token_b, b"retry-me", b"a receipt", "Receipt").await;
    assert_eq!(status, 201, "{other}");
    assert!(!replayed(&headers));
    assert_ne!(
        uuid_at(&other, "/document/id"),
        uuid_at(&first, "/document/id")
    );
    assert_eq!(documents_of(&app, tenant_b).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_key_with_another_request_answers_422_and_stores_nothing() {
    let app = TestApp::spawn().await;
    let (status, _, _) = upload_with_key(&app, &app.token, b"once", b"first bytes", "A").await;
    assert_eq!(status, 201);
    // Other bytes, then the same bytes under another title: other requests.
    let (status, headers, body) =
        upload_with_key(&app, &app.token, b"once", b"other bytes", "A").await;
    assert_problem(status, &body, 422, "idempotency_key_reused");
    assert_eq!(headers["content-type"], "application/problem+json");
    let (status, _, body) = upload_with_key(&app, &app.token, b"once", b"first bytes", "B").await;
    assert_problem(status, &body, 422, "idempotency_key_reused");
    // Another route with the same key.
    let (status, _, body) = post_json_with_key(
        &app,
        &app.token,
        "/api/documents/verify",
        "once",
        &json!({ "ids": [Uuid::now_v7()] }),
    )
    .await;
    assert_problem(status, &body, 422, "idempotency_key_reused");
    assert_eq!(documents_of(&app, app.tenant_id).await, 1);
    assert_eq!(
        app.context.stored_keys().await.len(),
        1,
        "refused bytes are not kept"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_key_answers_400_and_nothing_is_stored() {
    let app = TestApp::spawn().await;
    let too_long = vec![b'k'; 256];
    for key in [&b"two words"[..], &too_long, "clé".as_bytes(), b""] {
        let (status, _, body) = upload_with_key(&app, &app.token, key, b"bytes", "T").await;
        assert_problem(status, &body, 400, "invalid_idempotency_key");
        let response = app
            .http
            .post(format!("{}/api/members", app.address))
            .bearer_auth(&app.token)
            .header(
                "Idempotency-Key",
                reqwest::header::HeaderValue::from_bytes(key).expect("header value"),
            )
            .json(&json!({ "user_id": Uuid::now_v7(), "capability_set": "user" }))
            .send()
            .await
            .expect("post");
        let (status, _, body) = answer(response).await;
        assert_problem(status, &body, 400, "invalid_idempotency_key");
    }
    // The longest key is fine.
    let longest = vec![b'k'; 255];
    let (status, _, body) = upload_with_key(&app, &app.token, &longest, b"bytes", "T").await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(documents_of(&app, app.tenant_id).await, 1);
    assert_eq!(app.context.stored_keys().await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_verify_repeated_with_its_key_after_its_job_finished_enqueues_nothing_new() {
    let app = TestApp::spawn().await;
    app.start_dispatcher();
    let _worker = app.start_worker();
    let (document_id, job_id) = app.upload(b"verify me").await;
    app.wait_for_job(job_id, JobStatus::Succeeded).await;
    let body = json!({ "ids": [document_id] });
    let (status, _, first) =
        post_json_with_key(&app, &app.token, "/api/documents/verify", "scrub-1", &body).await;
    assert_eq!(status, 202, "{first}");
    let verify_job = uuid_at(&first, "/results/0/job/id");
    app.wait_for_job(verify_job, JobStatus::Succeeded).await;
    // The client never saw the answer and sends it again: without the key this would
    // be a second verify-document job, the first having finished.
    let (status, headers, again) =
        post_json_with_key(&app, &app.token, "/api/documents/verify", "scrub-1", &body).await;
    assert_eq!(status, 202, "{again}");
    assert!(replayed(&headers));
    assert_eq!(again, first);
    assert_eq!(jobs_of(&app, app.tenant_id, "verify-document").await, 1);
    // Re-analyze takes keys the same way; spacing and member order are the same request.
    let reanalyze = json!({ "force": true, "ids": [document_id] });
    let (status, _, first) = post_json_with_key(
        &app,
        &app.token,
        "/api/documents/reanalyze",
        "again-1",
        &reanalyze,
    )
    .await;
    assert_eq!(status, 202, "{first}");
    let reordered = json!({ "ids": [document_id], "force": true });
    let (status, headers, again) = post_json_with_key(
        &app,
        &app.token,
        "/api/documents/reanalyze",
        "again-1",
        &reordered,
    )
    .await;
    assert_eq!((status, replayed(&headers)), (202, true), "{again}");
    assert_eq!(again, first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_and_tenants_created_at_once_with_one_key_are_created_once() {
    let app = Arc::new(TestApp::spawn().await);
    let user_id = Uuid::now_v7();
    let barrier = Arc::new(Barrier::new(AT_ONCE));
    let mut tasks = Vec::new();
    for _ in 0..AT_ONCE {
        let (app, barrier) = (app.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            let body = json!({ "user_id": user_id, "capability_set": "readonly" });
            barrier.wait().await;
            post_json_with_key(&app, &app.token, "/api/members", "invite-1", &body).await
        }));
    }
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.expect("task"));
    }
    for (status, _, body) in &answers {
        assert_eq!(*status, 201, "not already_member: {body}");
        assert_eq!(body, &answers[0].2);
    }

    let operator = app.context.operator_token();
    let owner = Uuid::now_v7();
    let mut tasks = Vec::new();
    for _ in 0..AT_ONCE {
        let (app, barrier, operator) = (app.clone(), barrier.clone(), operator.clone());
        tasks.push(tokio::spawn(async move {
            let body = json!({ "name": "acme", "members": [owner] });
            barrier.wait().await;
            post_json_with_key(&app, &operator, "/api/admin/tenants", "create-acme", &body).await
        }));
    }
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.expect("task"));
    }
    for (status, _, body) in &answers {
        assert_eq!(*status, 202, "not tenant_name_taken: {body}");
        assert_eq!(body, &answers[0].2);
    }
    let tenant_id = uuid_at(&answers[0].2, "/tenant/id");
    assert_eq!(jobs_of(&app, tenant_id, "provision-tenant").await, 1);

    // Keys of tenant creation are per operator: another operator's same key is its own
    // request (here refused by the name, which the first one took).
    let other = quire_shared::auth::mint_admin(
        &app.context.settings.auth,
        "other-operator",
        std::time::Duration::from_secs(3600),
    )
    .expect("operator token");
    let body = json!({ "name": "acme", "members": [owner] });
    let (status, _, refused) =
        post_json_with_key(&app, &other, "/api/admin/tenants", "create-acme", &body).await;
    assert_problem(status, &refused, 409, "tenant_name_taken");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_key_is_free_again_and_retention_prunes_expired_keys() {
    let app = TestApp::spawn().await;
    let (_, _, first) = upload_with_key(&app, &app.token, b"old", b"january", "Jan").await;
    upload_with_key(&app, &app.token, b"older", b"february", "Feb").await;
    // As if 24 hours had passed.
    let mut conn = app.pool.get().await.expect("connection");
    diesel::sql_query(
        "UPDATE idempotency_keys SET expires_at = now() - interval '1 second' \
         WHERE tenant_id = $1",
    )
    .bind::<SqlUuid, _>(app.tenant_id)
    .execute(&mut conn)
    .await
    .expect("expire the keys");
    drop(conn);
    // The expired key names a new request now (the bytes are new: no duplicate).
    let (status, headers, fresh) = upload_with_key(&app, &app.token, b"old", b"march", "Mar").await;
    assert_eq!(status, 201, "{fresh}");
    assert!(!replayed(&headers));
    assert_ne!(
        uuid_at(&fresh, "/document/id"),
        uuid_at(&first, "/document/id")
    );

    // The dispatcher's retention removes the expired one that was not used again.
    app.start_dispatcher();
    eventually(DEADLINE, "retention pruned the expired key", || async {
        let left = count(
            &app,
            "SELECT count(*) AS count FROM idempotency_keys WHERE tenant_id = $1",
            app.tenant_id,
        )
        .await;
        (left == 1).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_declares_the_key_and_its_answers_on_each_route() {
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
    for path in [
        "/api/documents",
        "/api/documents/reanalyze",
        "/api/documents/verify",
        "/api/members",
        "/api/admin/tenants",
    ] {
        let operation = &spec["paths"][path]["post"];
        let parameters = operation["parameters"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            parameters
                .iter()
                .any(|p| p["name"] == "Idempotency-Key" && p["in"] == "header"),
            "{path} does not declare Idempotency-Key"
        );
        for status in ["400", "422"] {
            assert!(
                operation["responses"][status].is_object(),
                "{path} does not declare {status}"
            );
        }
    }
}
