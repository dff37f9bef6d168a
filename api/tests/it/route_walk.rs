//! Every route, walked with bad input: each answer is problem+json (or a plain success
//! for the few routes that take no input) and no body leaks anything internal.

use quire_api::routes::{DOCUMENTATION_ROUTES, ROUTES, STREAMING_ROUTES};
use reqwest::Method;

use crate::helpers::TestApp;

const LEAKS: &[&str] = &[
    "SQLSTATE",
    "syntax error",
    "diesel",
    "postgres://",
    "redis://",
    "tenants/",
    "/tmp/",
    "panicked",
    "quire_",
    "src/",
    ".rs:",
    "Uuid",
    "Error {",
    "broker_task_id",
    "storage_key",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_bad_input_with_a_problem_that_leaks_nothing() {
    let app = TestApp::spawn().await;
    let (document_id, job_id) = app.upload(b"a document to poke at").await;
    let operator = app.context.operator_token();
    // The first id stands for documents and tenants, the second for jobs and users.
    let substitutions: [(&str, String, String); 3] = [
        (
            "malformed ids",
            "not-a-uuid".into(),
            "'; DROP TABLE documents; --".into(),
        ),
        (
            "unknown ids",
            uuid::Uuid::now_v7().to_string(),
            uuid::Uuid::now_v7().to_string(),
        ),
        ("real ids", document_id.to_string(), job_id.to_string()),
    ];
    let bodies: [(&str, &str); 3] = [
        ("application/json", "{\"title\": 42, \"ids\": \"nope\""),
        ("application/json", "[]"),
        ("text/plain", "\u{0}\u{1}garbage"),
    ];
    let mut checked = 0;
    for (method, path) in ROUTES {
        // The documentation takes no input; a stream's body never ends (events.rs walks
        // its refusals).
        if DOCUMENTATION_ROUTES.contains(path) || STREAMING_ROUTES.contains(path) {
            continue;
        }
        for (_, document, job) in &substitutions {
            let url = format!(
                "{}{}",
                app.address,
                path.replace("{document_id}", document)
                    .replace("{tenant_id}", document)
                    .replace("{job_id}", job)
                    .replace("{user_id}", job)
                    .replace("{webhook_id}", document)
                    .replace("{delivery_id}", job)
            );
            let token = if path.starts_with("/api/admin/") {
                &operator
            } else {
                &app.token
            };
            for (content_type, body) in bodies {
                let method =
                    Method::from_bytes(method.to_ascii_uppercase().as_bytes()).expect("method");
                let response = app
                    .http
                    .request(method.clone(), &url)
                    .bearer_auth(token)
                    .header("content-type", content_type)
                    .body(body)
                    .send()
                    .await
                    .expect("request");
                let status = response.status();
                let kind = response
                    .headers()
                    .get("content-type")
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                let text = response.text().await.expect("body");
                if status.is_client_error() || status.is_server_error() {
                    assert_eq!(
                        kind, "application/problem+json",
                        "{method} {url}: {status} {text}"
                    );
                    assert!(!status.is_server_error(), "{method} {url}: {status} {text}");
                }
                for leak in LEAKS {
                    assert!(
                        !text.contains(leak),
                        "{method} {url} leaks {leak:?}: {text}"
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 100, "walked {checked} requests");
}
