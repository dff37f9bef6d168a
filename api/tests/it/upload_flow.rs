use quire_shared::db::outbox;
use quire_shared::states::{EventStatus, JobStatus};
use serde_json::Value;

use crate::helpers::TestApp;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uploaded_document_is_verified_end_to_end() {
    let app = TestApp::spawn().await;
    app.start_dispatcher();
    let _worker = app.start_worker();

    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(b"Invoice 2024-03-15, total 12.00 EUR".to_vec())
            .file_name("invoice.txt"),
    );
    let response = app
        .http
        .post(format!("{}/api/documents", app.address))
        .bearer_auth(&app.token)
        .header("x-request-id", "upload-4711")
        .multipart(form)
        .send()
        .await
        .expect("upload");
    assert_eq!(response.status(), 201);
    assert_eq!(response.headers()["x-request-id"], "upload-4711");
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["document"]["status"], "PENDING");
    assert_eq!(body["document"]["title"], "invoice.txt");
    assert_eq!(body["document"]["current_version"]["size_bytes"], 35);
    assert_eq!(body["job"]["type"], "analyze-document");
    let job_id = crate::helpers::uuid_at(&body, "/job/id");
    let document_id = crate::helpers::uuid_at(&body, "/document/id");

    let job = app.wait_for_job(job_id, JobStatus::Succeeded).await;
    assert_eq!(job.attempts, 1);
    assert!(job.error_code.is_none());

    // The event was published once Redis answered, with the task id the worker claimed by
    // (the express path marks it a linger after the push, so possibly after the finish).
    let mut conn = app.pool.get().await.expect("connection");
    let events = quire_shared::test_support::eventually(
        std::time::Duration::from_secs(10),
        "the job's event is marked published",
        || async {
            let mut conn = app.pool.get().await.expect("connection");
            let events = outbox::job_events(&mut conn, job_id).await.expect("events");
            (events.len() == 1 && events[0].status == EventStatus::Published).then_some(events)
        },
    )
    .await;
    assert_eq!(events[0].broker_task_id, job.last_task_id);
    // The upload's request id travels with the job, so its log lines can be followed.
    let message = outbox::event_message(&mut conn, events[0].id)
        .await
        .expect("message");
    assert_eq!(message["request_id"], "upload-4711", "{message}");

    // The analysis succeeded with the job: the document is READY.
    let document: Value = app
        .get_as(&app.token, &format!("/api/documents/{document_id}"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(document["status"], "READY");

    let view: Value = app
        .get_as(
            &app.token,
            &format!("/api/documents/{document_id}/processing-jobs/{job_id}"),
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(view["status"], "SUCCEEDED");
    assert_eq!(view["attempts"], 1);
    let keys: Vec<&str> = view
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    for secret in ["payload", "worker_id", "last_task_id", "current_event_id"] {
        assert!(!keys.contains(&secret), "job view exposes {secret}");
    }

    let list: Value = app
        .get_as(
            &app.token,
            &format!("/api/documents/{document_id}/processing-jobs"),
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(list["jobs"].as_array().map(Vec::len), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_a_valid_token_get_one_problem_body() {
    let app = TestApp::spawn().await;
    let url = format!("{}/api/documents/{}", app.address, uuid::Uuid::now_v7());

    let missing = app.http.get(&url).send().await.expect("request");
    assert_eq!(missing.status(), 401);
    assert_eq!(
        missing.headers()["content-type"].to_str().expect("header"),
        "application/problem+json"
    );
    let missing: Value = missing.json().await.expect("json");

    let forged = app
        .get_as("not-a-token", &url.replace(&app.address, ""))
        .await;
    assert_eq!(forged.status(), 401);
    let forged: Value = forged.json().await.expect("json");

    assert_eq!(missing["code"], "unauthorized");
    assert_eq!(missing["detail"], forged["detail"]);
    assert!(
        missing["request_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_file_or_a_missing_file_part_is_refused_and_nothing_is_recorded() {
    let app = TestApp::spawn().await;
    let empty = app.upload_as(&app.token, Vec::new(), "empty.txt").await;
    assert_eq!(empty.status(), 422);
    let body: Value = empty.json().await.expect("json");
    assert_eq!(body["code"], "empty_file");

    let no_file = app
        .http
        .post(format!("{}/api/documents", app.address))
        .bearer_auth(&app.token)
        .multipart(reqwest::multipart::Form::new().text("title", "only a title"))
        .send()
        .await
        .expect("request");
    assert_eq!(no_file.status(), 400);
    let body: Value = no_file.json().await.expect("json");
    assert_eq!(body["code"], "missing_file");

    let mut conn = app.pool.get().await.expect("connection");
    let jobs: i64 = diesel_async::RunQueryDsl::get_result(
        diesel::QueryDsl::count(quire_shared::db::schema::processing_jobs::table),
        &mut conn,
    )
    .await
    .expect("count");
    assert_eq!(jobs, 0);
}
