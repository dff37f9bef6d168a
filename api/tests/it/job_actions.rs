//! Retry and cancel are one action each (`quire_shared::actions::jobs`): the API route,
//! the dashboard's buttons and `quire-admin jobs` must all follow the same rule
//! (docs/decisions.md, "Retry and cancel").

use diesel_async::RunQueryDsl;
use quire_shared::states::JobStatus;
use serde_json::Value;
use uuid::Uuid;

use crate::helpers::TestApp;

/// A signed-in dashboard session that presses the job buttons, as a browser would.
struct Dashboard {
    http: reqwest::Client,
    address: String,
    cookie: String,
    csrf: String,
}

fn field(html: &str, name: &str) -> String {
    html.split(&format!("name=\"{name}\" value=\""))
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no {name} field in the page"))
        .to_owned()
}

fn cookie_named(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|value| value.starts_with(&format!("{name}=")))
        .and_then(|value| value.split(';').next())
        .unwrap_or_else(|| panic!("no {name} cookie"))
        .to_owned()
}

impl Dashboard {
    async fn sign_in(app: &TestApp) -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client");
        let address = app.address.clone();
        let form = http
            .get(format!("{address}/ops/login"))
            .send()
            .await
            .expect("sign-in form");
        let login_cookie = cookie_named(&form, "ops_login");
        let csrf = field(&form.text().await.expect("html"), "csrf");
        let signed_in = http
            .post(format!("{address}/ops/login"))
            .header("cookie", login_cookie)
            .form(&[("token", app.context.operator_token()), ("csrf", csrf)])
            .send()
            .await
            .expect("sign in");
        assert_eq!(signed_in.status(), 303);
        let cookie = cookie_named(&signed_in, "ops_session");
        let page = http
            .get(format!("{address}/ops"))
            .header("cookie", &cookie)
            .send()
            .await
            .expect("overview");
        let csrf = field(&page.text().await.expect("html"), "csrf");
        Self {
            http,
            address,
            cookie,
            csrf,
        }
    }

    /// Presses a job's button; the notice the dashboard answers with.
    async fn press(&self, job_id: Uuid, action: &str) -> String {
        let response = self
            .http
            .post(format!("{}/ops/jobs/{job_id}/{action}", self.address))
            .header("cookie", &self.cookie)
            .form(&[("csrf", &self.csrf)])
            .send()
            .await
            .expect("press");
        assert_eq!(response.status(), 303, "{action} answers with a redirect");
        response
            .headers()
            .get("location")
            .and_then(|value| value.to_str().ok())
            .expect("location")
            .to_owned()
    }
}

async fn document(app: &TestApp, document_id: Uuid) -> Value {
    app.get_as(&app.token, &format!("/api/documents/{document_id}"))
        .await
        .json()
        .await
        .expect("json")
}

/// Asks for a re-analysis of one document; its answer.
async fn reanalyze(app: &TestApp, document_id: Uuid, force: bool) -> Value {
    let body = serde_json::json!({ "ids": [document_id], "force": force });
    let (status, answer) = app
        .json_as(
            reqwest::Method::POST,
            &app.token,
            "/api/documents/reanalyze",
            Some(body),
        )
        .await;
    assert_eq!(status, 202, "{answer}");
    answer
}

/// Uploads `count` documents whose stored bytes are then damaged, and waits until each
/// analysis failed for good; no worker runs afterwards.
async fn failed_analyses(app: &TestApp, count: usize) -> Vec<(Uuid, Uuid)> {
    let mut uploaded = Vec::with_capacity(count);
    for index in 0..count {
        let (document_id, job_id) = app.upload(format!("document {index}").as_bytes()).await;
        let key = crate::integrity::stored_key(app, document_id).await;
        app.context
            .overwrite_stored(&key, format!("damaged {index}!!").as_bytes())
            .await;
        uploaded.push((document_id, job_id));
    }
    app.start_dispatcher();
    let worker = app.start_worker();
    for &(_, job_id) in &uploaded {
        app.wait_for_job(job_id, JobStatus::Failed).await;
    }
    worker.drain().await;
    uploaded
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_analysis_puts_its_document_back_to_pending_whoever_retries_it() {
    let app = TestApp::spawn().await;
    let failed = failed_analyses(&app, 3).await;
    let dashboard = Dashboard::sign_in(&app).await;
    let (by_route, by_dashboard, by_cli) = (failed[0], failed[1], failed[2]);

    let route = format!(
        "/api/documents/{}/processing-jobs/{}/retry",
        by_route.0, by_route.1
    );
    assert_eq!(app.post_as(&app.token, &route).await.status(), 202);
    let notice = dashboard.press(by_dashboard.1, "retry").await;
    assert!(notice.contains("queued+again"), "{notice}");
    let (ok, out, err) = app.admin_cli(&["jobs", "retry", &by_cli.1.to_string()]);
    assert!(ok && out.contains("QUEUED"), "{out} {err}");

    for (document_id, job_id) in failed {
        let job = app.job(job_id).await;
        assert_eq!(job.status, JobStatus::Queued);
        assert_eq!(
            job.max_attempts,
            job.attempts + app.context.settings.jobs.max_attempts,
            "the type's budget again"
        );
        let document = document(&app, document_id).await;
        assert_eq!(document["status"], "PENDING", "{document}");
        assert_eq!(document["processing_error"], Value::Null);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_beside_an_active_analysis_is_refused_alike_by_every_caller() {
    let app = TestApp::spawn().await;
    let failed = failed_analyses(&app, 1).await;
    let (document_id, job_id) = failed[0];
    // A re-analysis of the same version is queued: the failed job may not run beside it.
    reanalyze(&app, document_id, false).await;
    let dashboard = Dashboard::sign_in(&app).await;

    let route = format!("/api/documents/{document_id}/processing-jobs/{job_id}/retry");
    let refused = app.post_as(&app.token, &route).await;
    assert_eq!(refused.status(), 409);
    let problem: Value = refused.json().await.expect("json");
    assert_eq!(problem["code"], "job_already_active");
    let notice = dashboard.press(job_id, "retry").await;
    assert!(notice.contains("another+job"), "{notice}");
    let (ok, _, err) = app.admin_cli(&["jobs", "retry", &job_id.to_string()]);
    assert!(!ok && err.contains("queued or running"), "{err}");
    assert_eq!(app.job(job_id).await.status, JobStatus::Failed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_analysis_never_leaves_its_document_waiting() {
    let app = TestApp::spawn().await;
    // No worker: each analysis stays queued and its document PENDING until cancelled.
    let (from_dashboard, dashboard_job) = app.upload(b"cancelled from the dashboard").await;
    let (from_cli, cli_job) = app.upload(b"cancelled from the command line").await;
    let dashboard = Dashboard::sign_in(&app).await;

    let notice = dashboard.press(dashboard_job, "cancel").await;
    assert!(notice.contains("job+cancelled"), "{notice}");
    let (ok, out, err) = app.admin_cli(&["jobs", "cancel", &cli_job.to_string()]);
    assert!(ok && out.contains("CANCELLED"), "{out} {err}");

    for document_id in [from_dashboard, from_cli] {
        let document = document(&app, document_id).await;
        assert_eq!(document["status"], "FAILED", "never analyzed: {document}");
        assert!(
            document["processing_error"]
                .as_str()
                .is_some_and(|error| error.contains("cancelled")),
            "{document}"
        );
    }
    assert_eq!(app.job(dashboard_job).await.status, JobStatus::Cancelled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_re_analysis_leaves_an_analyzed_document_ready() {
    let app = TestApp::spawn().await;
    let (document_id, first) = app.upload(b"analyzed once already").await;
    app.start_dispatcher();
    let worker = app.start_worker();
    app.wait_for_job(first, JobStatus::Succeeded).await;
    worker.drain().await;
    let answer = reanalyze(&app, document_id, true).await;
    let again: Uuid = answer["results"][0]["job"]["id"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .expect("a new analysis");
    // As if a worker had started it: the document is PROCESSING.
    let mut conn = app.pool.get().await.expect("connection");
    diesel::sql_query("UPDATE documents SET status = 'PROCESSING' WHERE id = $1")
        .bind::<diesel::sql_types::Uuid, _>(document_id)
        .execute(&mut conn)
        .await
        .expect("processing");

    let (ok, _, err) = app.admin_cli(&["jobs", "cancel", &again.to_string()]);
    assert!(ok, "{err}");

    let document = document(&app, document_id).await;
    assert_eq!(document["status"], "READY", "{document}");
    assert_eq!(document["processing_error"], Value::Null);
}
