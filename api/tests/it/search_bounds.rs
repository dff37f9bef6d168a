//! A reader's search has bounded cost: the headline reads only the start of a text, a
//! cursor cannot ask for a page deeper than the bound, and a search that runs past its
//! statement timeout answers a problem instead of holding its connection.

use std::time::Duration;

use diesel_async::SimpleAsyncConnection;
use reqwest::Method;
use serde_json::Value;
use uuid::Uuid;

use crate::helpers::{TestApp, uuid_at};
use quire_shared::search::HEADLINE_SOURCE_CHARS;
use quire_shared::states::JobStatus;

async fn upload_text(app: &TestApp, text: String) -> (Uuid, Uuid) {
    let response = app
        .upload_as(&app.token, text.into_bytes(), "long.txt")
        .await;
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.expect("json");
    (uuid_at(&body, "/document/id"), uuid_at(&body, "/job/id"))
}

fn matched_words(hit: &Value) -> Vec<String> {
    hit["search"]["snippet"]
        .as_array()
        .expect("snippet")
        .iter()
        .filter(|part| part["match"] == true)
        .map(|part| part["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_headline_is_computed_from_the_start_of_the_text_only() {
    let app = TestApp::spawn().await;
    // `quokka` at the start, `wombat` well past the headline's source.
    let filler = "filler ".repeat(HEADLINE_SOURCE_CHARS / 7 + 100);
    let (id, job) = upload_text(&app, format!("quokka here\n{filler}\nwombat there\n")).await;
    app.start_dispatcher();
    let _worker = app.start_worker();
    app.wait_for_job(job, JobStatus::Succeeded).await;

    for (word, highlighted) in [("quokka", true), ("wombat", false)] {
        let (status, body) = app
            .json_as(
                Method::GET,
                &app.token,
                &format!("/api/documents/search?q={word}"),
                None,
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let hits = body["documents"].as_array().expect("documents");
        // Found either way: the index covers the whole text, the headline does not.
        assert_eq!(hits.len(), 1, "{word}: {body}");
        assert_eq!(uuid_at(&hits[0], "/id"), id);
        assert_eq!(
            !matched_words(&hits[0]).is_empty(),
            highlighted,
            "{word}: {}",
            hits[0]["search"]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_cursor_beyond_the_deepest_page_answers_422() {
    let app = TestApp::spawn().await;
    let deep = hex::encode(format!(
        "s1.{}",
        quire_shared::search::MAX_SEARCH_OFFSET + 1
    ));
    let (status, body) = app
        .json_as(
            Method::GET,
            &app.token,
            &format!("/api/documents/search?q=invoice&cursor={deep}"),
            None,
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["code"], "search_too_deep", "{body}");

    // The deepest page allowed still answers.
    let deepest = hex::encode(format!("s1.{}", quire_shared::search::MAX_SEARCH_OFFSET));
    let (status, body) = app
        .json_as(
            Method::GET,
            &app.token,
            &format!("/api/documents/search?q=invoice&cursor={deepest}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_past_its_statement_timeout_answers_503_search_timeout() {
    let app = TestApp::spawn().await;
    // A search that cannot finish: another session holds the documents table. Without a
    // statement timeout the request would wait for as long as the lock is held.
    let mut holder = app.lock_documents_table().await;

    let response = app
        .http
        .get(format!("{}/api/documents/search?q=invoice", app.address))
        .bearer_auth(&app.token)
        // Far longer than the search's timeout: a bound for a broken build, not a speed.
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("the search answers while the table is locked");
    assert_eq!(response.status(), 503);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["code"], "search_timeout", "{body}");

    holder.batch_execute("ROLLBACK").await.expect("unlock");
    // The connection that timed out went back to the pool healthy: the next search runs.
    let (status, body) = app
        .json_as(
            Method::GET,
            &app.token,
            "/api/documents/search?q=invoice",
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
}
