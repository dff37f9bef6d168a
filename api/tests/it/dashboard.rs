//! The operator dashboard in a real browser: headless Chromium (Debian's `chromium`),
//! driven over the DevTools protocol. Sign in, see a failed job, retry it, see it
//! succeed; a screenshot is kept in `target/test-artifacts/`. The session cookie's flags
//! and the CSRF checks are asserted over plain HTTP first.

use std::process::Stdio;
use std::time::Duration;

use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use quire_shared::jobs::FaultTest;
use quire_shared::states::JobStatus;
use quire_shared::test_support::{DEADLINE, eventually, free_port};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use uuid::Uuid;

use crate::helpers::TestApp;

/// A headless Chromium with its DevTools endpoint on a free port; killed when dropped.
struct Browser {
    _process: tokio::process::Child,
    _profile: tempfile::TempDir,
    port: u16,
}

impl Browser {
    async fn start() -> Self {
        let port = free_port();
        let profile = tempfile::tempdir().expect("profile folder");
        let process = tokio::process::Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-quic",
                "--no-first-run",
                "--window-size=1280,1600",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(format!("--remote-debugging-port={port}"))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect(
                "chromium (Debian's chromium package) must be installed: scripts/test installs it",
            );
        Self {
            _process: process,
            _profile: profile,
            port,
        }
    }

    /// A DevTools session on the browser's first page.
    async fn page(&self) -> Page {
        let url = format!("http://127.0.0.1:{}/json/list", self.port);
        let socket = eventually(DEADLINE, "chromium's DevTools answer", || async {
            let pages: Value = reqwest::get(&url).await.ok()?.json().await.ok()?;
            pages
                .as_array()?
                .iter()
                .find(|page| page["type"] == "page")?["webSocketDebuggerUrl"]
                .as_str()
                .map(str::to_owned)
        })
        .await;
        let (socket, _) = tokio_tungstenite::connect_async(socket.as_str())
            .await
            .expect("connect to DevTools");
        let mut page = Page { socket, next_id: 0 };
        page.call("Page.enable", json!({})).await;
        page
    }
}

struct Page {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
}

impl Page {
    /// Sends one DevTools command and waits for its answer (events are skipped).
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let request = json!({ "id": id, "method": method, "params": params }).to_string();
        self.socket
            .send(Message::Text(request.into()))
            .await
            .expect("send to DevTools");
        loop {
            let message = tokio::time::timeout(DEADLINE, self.socket.next())
                .await
                .expect("DevTools answers in time")
                .expect("DevTools socket open")
                .expect("DevTools message");
            let Message::Text(text) = message else {
                continue;
            };
            let value: Value = serde_json::from_str(&text).expect("DevTools JSON");
            if value["id"] == id {
                assert!(value.get("error").is_none(), "{method} failed: {value}");
                return value["result"].clone();
            }
        }
    }

    async fn eval(&mut self, expression: &str) -> Value {
        let result = self
            .call(
                "Runtime.evaluate",
                json!({ "expression": expression, "returnByValue": true }),
            )
            .await;
        result["result"]["value"].clone()
    }

    async fn navigate(&mut self, url: &str) {
        self.call("Page.navigate", json!({ "url": url })).await;
    }

    /// Waits until the page at `path` (a path, with a query prefix if it has `?`) has
    /// loaded, after a navigation or a form post.
    async fn wait_for(&mut self, path: &str) {
        let (pathname, query) = path.split_once('?').unwrap_or((path, ""));
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let state = self
                .eval("[document.readyState, location.pathname, location.search].join(' ')")
                .await;
            let state = state.as_str().unwrap_or_default().to_owned();
            let mut parts = state.splitn(3, ' ');
            let (ready, at, search) = (
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
            );
            if ready == "complete"
                && at == pathname
                && search.trim_start_matches('?').starts_with(query)
            {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the page never reached {path}: {state}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn text_of(&mut self, selector: &str) -> String {
        self.eval(&format!(
            "(document.querySelector({selector:?}) || {{innerText: ''}}).innerText"
        ))
        .await
        .as_str()
        .unwrap_or_default()
        .to_owned()
    }
}

/// A fault-test job that fails its five attempts, so that a retry (a fresh budget)
/// succeeds.
async fn failed_job(app: &TestApp) -> Uuid {
    app.create_oracle_tables().await;
    let job = app
        .enqueue_fault_jobs(
            1,
            FaultTest {
                transient_failures: 5,
                ..FaultTest::default()
            },
        )
        .await[0];
    app.wait_for_job(job, JobStatus::Failed).await;
    job
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_cookie_is_strict_and_forms_need_their_csrf_token() {
    let app = TestApp::spawn().await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let page = http
        .get(format!("{}/ops", app.address))
        .send()
        .await
        .expect("get");
    assert_eq!(page.status(), 303, "no session: to the sign-in form");

    let form = http
        .get(format!("{}/ops/login", app.address))
        .send()
        .await
        .expect("get");
    let login_cookie = form
        .headers()
        .get("set-cookie")
        .and_then(|value| value.to_str().ok())
        .expect("a pre-session cookie")
        .to_owned();
    let html = form.text().await.expect("html");
    let csrf = html
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("csrf field")
        .to_owned();
    let cookie_pair = login_cookie.split(';').next().expect("pair").to_owned();
    let sign_in = |token: String, csrf: String| {
        http.post(format!("{}/ops/login", app.address))
            .header("cookie", cookie_pair.clone())
            .form(&[("token", token), ("csrf", csrf)])
            .send()
    };
    let refused = sign_in(app.token.clone(), csrf.clone())
        .await
        .expect("post");
    assert_eq!(
        refused.status(),
        401,
        "a user token is not an operator token"
    );
    let content_type = refused
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(
        content_type.starts_with("text/html"),
        "the sign-in page answers as a page, not problem+json: {content_type}"
    );
    let page = refused.text().await.expect("html");
    assert!(page.contains("not a valid operator token"), "{page}");
    let forged = sign_in(app.context.operator_token(), "00".repeat(32))
        .await
        .expect("post");
    assert_eq!(
        forged.status(),
        403,
        "a sign-in without its CSRF token is refused"
    );
    let signed_in = sign_in(app.context.operator_token(), csrf)
        .await
        .expect("post");
    assert_eq!(signed_in.status(), 303);
    let session = signed_in
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|value| value.starts_with("ops_session="))
        .expect("a session cookie")
        .to_owned();
    for flag in ["Secure", "HttpOnly", "SameSite=Strict", "Path=/ops"] {
        assert!(session.contains(flag), "{flag} missing: {session}");
    }
    let session_pair = session.split(';').next().expect("pair").to_owned();
    let job = Uuid::now_v7();
    let action = http
        .post(format!("{}/ops/jobs/{job}/cancel", app.address))
        .header("cookie", session_pair)
        .form(&[("csrf", "deadbeef")])
        .send()
        .await
        .expect("post");
    assert_eq!(
        action.status(),
        403,
        "an action without the session's CSRF token"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_retries_a_failed_job_from_the_dashboard_in_a_browser() {
    let app = TestApp::spawn().await;
    app.start_dispatcher();
    let _worker = app.start_worker();
    let job = failed_job(&app).await;

    let browser = Browser::start().await;
    let mut page = browser.page().await;
    page.navigate(&format!("{}/ops", app.address)).await;
    page.wait_for("/ops/login").await;
    let token = app.context.operator_token();
    page.eval(&format!(
        "document.getElementById('token').value = {token:?}; \
         document.getElementById('sign-in').click(); true"
    ))
    .await;
    page.wait_for("/ops").await;
    let failed = page.text_of("#failed").await;
    assert!(
        failed.contains(&job.to_string()),
        "the failed job is listed: {failed}"
    );
    assert!(
        failed.contains("fault_transient"),
        "with its safe error code: {failed}"
    );

    page.eval(&format!(
        "document.getElementById('retry-{job}').click(); true"
    ))
    .await;
    page.wait_for("/ops?notice=job").await;
    app.wait_for_job(job, JobStatus::Succeeded).await;

    page.navigate(&format!("{}/ops", app.address)).await;
    page.wait_for("/ops").await;
    let finished = page.text_of(&format!("#finished #job-{job}")).await;
    assert!(
        finished.contains("SUCCEEDED"),
        "the retried job succeeded: {finished}"
    );
    assert!(!page.text_of("#failed").await.contains(&job.to_string()));

    let shot = page
        .call(
            "Page.captureScreenshot",
            json!({ "format": "png", "captureBeyondViewport": true }),
        )
        .await;
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot["data"].as_str().expect("screenshot data"))
        .expect("base64");
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    let artifacts =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-artifacts");
    std::fs::create_dir_all(&artifacts).expect("artifact folder");
    std::fs::write(artifacts.join("ops-dashboard.png"), png).expect("save screenshot");
}
