//! A job's finishing transaction against a user's write of the same document: both take
//! the job rows before the document row, so one waits for the other and neither fails.
//! A finish holding the job row while a trash (or a title edit) held the document and
//! waited for the job used to deadlock, and PostgreSQL ended one of them.

use diesel::sql_types::Bool;
use diesel_async::RunQueryDsl;
use quire_shared::fault_points::{self, Point};
use quire_shared::states::JobStatus;
use reqwest::Method;

use crate::helpers::{DEADLINE, TestApp};

#[derive(diesel::QueryableByName)]
struct Waiting {
    #[diesel(sql_type = Bool)]
    waiting: bool,
}

/// Waits (up to the deadline) until a session of this test's database waits for a lock.
async fn await_lock_wait(app: &TestApp) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let mut conn = app.pool.get().await.expect("connection");
    loop {
        let row: Waiting = diesel::sql_query(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity \
                            WHERE datname = current_database() AND wait_event_type = 'Lock') \
             AS waiting",
        )
        .get_result(&mut conn)
        .await
        .expect("pg_stat_activity");
        if row.waiting {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the trash never waited for the finishing analysis"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_trashed_while_its_analysis_finishes_is_trashed_and_the_job_succeeds() {
    let app = TestApp::spawn().await;
    let (document_id, job_id) = app.upload(b"a letter finished as it is thrown away").await;
    let mut held = fault_points::hold(Point::FinishBeforeDocument, document_id);
    app.start_dispatcher();
    let worker = app.start_worker();
    tokio::time::timeout(DEADLINE, held.reached())
        .await
        .expect("the analysis reaches its finish");

    // The trash starts while the finish holds its locks, and waits for them.
    let trash = {
        let http = app.http.clone();
        let url = format!("{}/api/documents/{document_id}", app.address);
        let token = app.token.clone();
        tokio::spawn(async move {
            http.delete(url)
                .bearer_auth(token)
                .send()
                .await
                .expect("trash")
        })
    };
    await_lock_wait(&app).await;
    held.release();

    let answer = trash.await.expect("the trash request");
    let status = answer.status();
    let body = answer.text().await.unwrap_or_default();
    assert_eq!(status, 200, "the trash waits its turn and succeeds: {body}");
    app.wait_for_job(job_id, JobStatus::Succeeded).await;
    worker.drain().await;
    let (status, body) = app
        .json_as(
            Method::GET,
            &app.token,
            &format!("/api/documents/{document_id}"),
            None,
        )
        .await;
    assert_eq!(status, 404, "in the trash: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_title_edited_while_its_analysis_finishes_analyzes_again_and_the_job_succeeds_once() {
    let app = TestApp::spawn().await;
    let (document_id, job_id) = app.upload(b"a letter renamed as it is read").await;
    let mut held = fault_points::hold(Point::FinishBeforeDocument, document_id);
    app.start_dispatcher();
    let worker = app.start_worker();
    tokio::time::timeout(DEADLINE, held.reached())
        .await
        .expect("the analysis reaches its finish");

    // A new title analyzes the version again; its job meets the finishing one in the
    // one-active-analysis index, so the edit waits for the finish to end. It used to hold
    // the document row meanwhile, and the finish then waited for it: a deadlock that
    // PostgreSQL ended by failing one of them.
    let edit = {
        let http = app.http.clone();
        let url = format!("{}/api/documents/{document_id}", app.address);
        let token = app.token.clone();
        tokio::spawn(async move {
            http.patch(url)
                .bearer_auth(token)
                .json(&serde_json::json!({ "title": "Renamed while read" }))
                .send()
                .await
                .expect("edit")
        })
    };
    await_lock_wait(&app).await;
    held.release();

    let answer = edit.await.expect("the edit request");
    let status = answer.status();
    let body: serde_json::Value = answer.json().await.expect("the edit's body");
    assert_eq!(status, 200, "the edit waits its turn and succeeds: {body}");
    let again = body["job"]["id"].as_str().expect("the edit's new analysis");
    assert_ne!(
        again,
        job_id.to_string(),
        "a new analysis, not the finished one: {body}"
    );
    let finished = app.wait_for_job(job_id, JobStatus::Succeeded).await;
    assert_eq!(
        finished.attempts, 1,
        "the finish committed at once: {finished:?}"
    );
    worker.drain().await;
}
