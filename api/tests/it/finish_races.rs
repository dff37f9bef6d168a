//! A job's finishing transaction against a user's write of the same document: both take
//! the job rows before the document row, so one waits for the other and neither fails.
//! A finish holding the job row while a trash (or a title edit) held the document and
//! waited for the job used to deadlock, and PostgreSQL ended one of them.

use diesel_async::RunQueryDsl;
use quire_shared::fault_points::{self, Point};
use quire_shared::states::JobStatus;
use quire_shared::test_support::{RunningService, await_lock_wait};
use reqwest::Method;
use uuid::Uuid;

use crate::helpers::{DEADLINE, TestApp, uuid_at};

/// What a request sent while a document's analysis holds its finish was answered.
struct Raced {
    document_id: Uuid,
    job_id: Uuid,
    answer: reqwest::Response,
    worker: RunningService,
}

/// Uploads `bytes`, holds its analysis at the finish (its job row locked), sends the
/// request `send` builds for the document's URL, waits until that request waits for a
/// lock, then lets the finish go on; the request's answer.
async fn race_with_finish(
    app: &TestApp,
    bytes: &[u8],
    send: impl FnOnce(&reqwest::Client, String) -> reqwest::RequestBuilder,
) -> Raced {
    let (document_id, job_id) = app.upload(bytes).await;
    let mut held = fault_points::hold(Point::FinishBeforeDocument, document_id);
    app.start_dispatcher();
    let worker = app.start_worker();
    tokio::time::timeout(DEADLINE, held.reached())
        .await
        .expect("the analysis reaches its finish");
    let url = format!("{}/api/documents/{document_id}", app.address);
    let request = send(&app.http, url).bearer_auth(&app.token).send();
    let answer = tokio::spawn(request);
    await_lock_wait(&app.pool).await;
    held.release();
    let answer = answer
        .await
        .expect("the request's task")
        .expect("an answer");
    Raced {
        document_id,
        job_id,
        answer,
        worker,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_trashed_while_its_analysis_finishes_is_trashed_and_the_job_succeeds() {
    let app = TestApp::spawn().await;
    // The trash starts while the finish holds its locks, and waits for them.
    let raced = race_with_finish(
        &app,
        b"a letter finished as it is thrown away",
        |http, url| http.delete(url),
    )
    .await;
    let status = raced.answer.status();
    let body = raced.answer.text().await.unwrap_or_default();
    assert_eq!(status, 200, "the trash waits its turn and succeeds: {body}");
    app.wait_for_job(raced.job_id, JobStatus::Succeeded).await;
    raced.worker.drain().await;
    let (status, body) = app
        .json_as(
            Method::GET,
            &app.token,
            &format!("/api/documents/{}", raced.document_id),
            None,
        )
        .await;
    assert_eq!(status, 404, "in the trash: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_title_edited_while_its_analysis_finishes_analyzes_again_and_the_job_succeeds_once() {
    let app = TestApp::spawn().await;
    // A new title analyzes the version again; its job meets the finishing one in the
    // one-active-analysis index, so the edit waits for the finish to end. It used to hold
    // the document row meanwhile, and the finish then waited for it: a deadlock that
    // PostgreSQL ended by failing one of them.
    let raced = race_with_finish(&app, b"a letter renamed as it is read", |http, url| {
        http.patch(url)
            .json(&serde_json::json!({ "title": "Renamed while read" }))
    })
    .await;
    let status = raced.answer.status();
    let body: serde_json::Value = raced.answer.json().await.expect("the edit's body");
    assert_eq!(status, 200, "the edit waits its turn and succeeds: {body}");
    let again = body["job"]["id"].as_str().expect("the edit's new analysis");
    assert_ne!(
        again,
        raced.job_id.to_string(),
        "a new analysis, not the finished one: {body}"
    );
    let finished = app.wait_for_job(raced.job_id, JobStatus::Succeeded).await;
    assert_eq!(
        finished.attempts, 1,
        "the finish committed at once: {finished:?}"
    );
    raced.worker.drain().await;
}

/// A restore of a trashed document whose purge is queued, against a transaction that
/// holds that purge job and then wants the document (the order of a DELETE of the
/// trashed document, and of every finish and cancel). The restore used to lock the
/// document first and the queued purge after: each held what the other wanted, and
/// PostgreSQL ended one of them with "deadlock detected".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_waits_for_a_held_purge_job_without_holding_the_document() {
    let app = TestApp::spawn().await;
    let (document_id, _) = app.upload(b"a letter thrown away, then wanted back").await;
    let path = format!("/api/documents/{document_id}");
    let (status, body) = app.json_as(Method::DELETE, &app.token, &path, None).await;
    assert_eq!(status, 200, "trashed: {body}");
    // Nothing runs jobs here: the purge stays queued.
    let (status, body) = app.json_as(Method::DELETE, &app.token, &path, None).await;
    assert_eq!(status, 202, "purge queued: {body}");
    let purge_id = uuid_at(&body, "/job/id");

    let mut held = app.pool.get().await.expect("connection");
    let restored = diesel_async::AsyncConnection::transaction::<_, diesel::result::Error, _>(
        &mut *held,
        async |conn| {
            diesel::sql_query("SELECT id FROM processing_jobs WHERE id = $1 FOR UPDATE")
                .bind::<diesel::sql_types::Uuid, _>(purge_id)
                .execute(conn)
                .await?;
            let restore = app
                .http
                .post(format!("{}{path}/restore", app.address))
                .bearer_auth(&app.token)
                .send();
            let answer = tokio::spawn(restore);
            await_lock_wait(&app.pool).await;
            // The restore waits for the job; the document must still be free.
            diesel::sql_query("SELECT id FROM documents WHERE id = $1 FOR UPDATE")
                .bind::<diesel::sql_types::Uuid, _>(document_id)
                .execute(conn)
                .await?;
            Ok(answer)
        },
    )
    .await
    .expect("the holder gets the document after the purge job, without a deadlock");
    let answer = restored
        .await
        .expect("the restore's task")
        .expect("an answer");
    let status = answer.status();
    let body = answer.text().await.unwrap_or_default();
    assert_eq!(
        status, 200,
        "the restore waits its turn and succeeds: {body}"
    );
    assert_eq!(app.job(purge_id).await.status, JobStatus::Cancelled);
}
