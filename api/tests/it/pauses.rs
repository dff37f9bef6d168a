//! Pausing a tenant's processing or a queue holds its queued jobs — not published by the
//! scheduler, and not run by a worker even when its message was in Redis already when
//! the pause came (the claim refuses it and leaves it `QUEUED`) — and they continue on
//! resume. One action each (`quire_shared::actions::scheduling`), through the admin
//! route, `quire-admin` and the dashboard alike.

use quire_shared::db::outbox;
use quire_shared::states::{EventStatus, JobStatus};
use quire_shared::test_support::eventually;
use reqwest::Method;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::{DEADLINE, TestApp, uuid_at};
use crate::job_actions::Dashboard;

impl Dashboard {
    /// Submits a dashboard form at `path` with `fields` (the CSRF token added); the
    /// notice its redirect carries.
    pub(crate) async fn submit(&self, path: &str, fields: &[(&str, &str)]) -> String {
        let mut form: Vec<(&str, &str)> = vec![("csrf", &self.csrf)];
        form.extend_from_slice(fields);
        let response = self
            .http
            .post(format!("{}{path}", self.address))
            .header("cookie", &self.cookie)
            .form(&form)
            .send()
            .await
            .expect("submit");
        assert_eq!(response.status(), 303, "{path} answers with a redirect");
        response
            .headers()
            .get("location")
            .and_then(|value| value.to_str().ok())
            .expect("location")
            .to_owned()
    }

    pub(crate) async fn page(&self, path: &str) -> String {
        self.http
            .get(format!("{}{path}", self.address))
            .header("cookie", &self.cookie)
            .send()
            .await
            .expect("page")
            .text()
            .await
            .expect("html")
    }
}

/// An operator's request to an admin route: its status and JSON body.
pub(crate) async fn admin(
    app: &TestApp,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    app.json_as(method, &app.context.operator_token(), path, body)
        .await
}

/// Uploads `bytes` as the owner behind `token`: (document id, job id, the job's view).
async fn upload(app: &TestApp, token: &str, bytes: &str) -> (Uuid, Uuid, Value) {
    let response = app
        .upload_as(token, bytes.as_bytes().to_vec(), "note.txt")
        .await;
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.expect("json");
    (
        uuid_at(&body, "/document/id"),
        uuid_at(&body, "/job/id"),
        body["job"].clone(),
    )
}

/// The job as its document's members see it.
async fn job_view(app: &TestApp, token: &str, document_id: Uuid, job_id: Uuid) -> Value {
    let (status, view) = app
        .json_as(
            Method::GET,
            token,
            &format!("/api/documents/{document_id}/processing-jobs/{job_id}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{view}");
    view
}

/// Waits until the job's current event is published: its message is in Redis.
async fn wait_until_published(app: &TestApp, job_id: Uuid) {
    eventually(DEADLINE, "the job's message is in redis", || async {
        let mut conn = app.pool.get().await.expect("connection");
        let events = outbox::job_events(&mut conn, job_id).await.expect("events");
        events
            .last()
            .is_some_and(|event| event.status == EventStatus::Published)
            .then_some(())
    })
    .await;
}

/// A held job: still `QUEUED`, never claimed.
async fn assert_held(app: &TestApp, job_id: Uuid) {
    let job = app.job(job_id).await;
    assert_eq!(job.status, JobStatus::Queued, "a held job waits");
    assert_eq!(job.attempts, 0, "a held job was never claimed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_tenants_job_waits_even_with_its_message_in_redis_while_another_tenant_runs() {
    let app = TestApp::spawn().await;
    let (tenant_b, token_b) = app.add_tenant("tenant-b").await;
    app.start_dispatcher();
    // Tenant A's job is published before the pause: its message waits in Redis.
    let (document_a, job_a, _) = upload(&app, &app.token, "tenant a's letter").await;
    wait_until_published(&app, job_a).await;
    let (status, paused) = admin(
        &app,
        Method::POST,
        &format!("/api/admin/tenants/{}/pause", app.tenant_id),
        None,
    )
    .await;
    assert_eq!(status, 200, "{paused}");
    assert!(paused["processing_paused_at"].is_string(), "{paused}");

    let (document_b, job_b, view_b) = upload(&app, &token_b, "tenant b's letter").await;
    assert_eq!(view_b["held"], Value::Null, "{view_b}");
    let _worker = app.start_worker();
    app.wait_for_job(job_b, JobStatus::Succeeded).await;
    // A's message was pushed before B's: popped (and refused) by now, or never
    // published at all by a scheduler that skips paused tenants.
    app.context.wait_until_consumed("analyze-document").await;
    assert_held(&app, job_a).await;
    let view_a = job_view(&app, &app.token, document_a, job_a).await;
    assert_eq!(view_a["held"], "tenant_paused", "{view_a}");
    assert_eq!(
        job_view(&app, &token_b, document_b, job_b).await["held"],
        Value::Null
    );
    let (_, tenant) = admin(
        &app,
        Method::GET,
        &format!("/api/admin/tenants/{tenant_b}"),
        None,
    )
    .await;
    assert_eq!(tenant["tenant"]["processing_paused_at"], Value::Null);

    let (status, resumed) = admin(
        &app,
        Method::POST,
        &format!("/api/admin/tenants/{}/resume", app.tenant_id),
        None,
    )
    .await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["tenant"]["processing_paused_at"], Value::Null);
    app.wait_for_job(job_a, JobStatus::Succeeded).await;
    assert_eq!(
        job_view(&app, &app.token, document_a, job_a).await["held"],
        Value::Null
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_queue_holds_its_jobs_while_other_queues_run_and_continues_on_resume() {
    let app = TestApp::spawn().await;
    app.start_dispatcher();
    let _worker = app.start_worker();
    let (analyzed, first_job, _) = upload(&app, &app.token, "analyzed before the pause").await;
    app.wait_for_job(first_job, JobStatus::Succeeded).await;

    let (ok, out, err) = app.admin_cli(&["queue", "pause", "analyze-document"]);
    assert!(
        ok && out.contains("analyze-document\tpaused"),
        "{out} {err}"
    );
    let (document, held_job, view) = upload(&app, &app.token, "analyzed after the resume").await;
    assert_eq!(view["held"], "queue_paused", "{view}");
    // Another queue runs meanwhile.
    let (status, verified) = app
        .json_as(
            Method::POST,
            &app.token,
            "/api/documents/verify",
            Some(json!({ "ids": [analyzed] })),
        )
        .await;
    assert_eq!(status, 202, "{verified}");
    let verify_job = uuid_at(&verified, "/results/0/job/id");
    app.wait_for_job(verify_job, JobStatus::Succeeded).await;
    app.context.wait_until_consumed("analyze-document").await;
    assert_held(&app, held_job).await;
    assert_eq!(
        job_view(&app, &app.token, document, held_job).await["held"],
        "queue_paused"
    );
    let (ok, out, _) = app.admin_cli(&["queue", "list"]);
    assert!(ok && out.contains("analyze-document\tpaused"), "{out}");

    let dashboard = Dashboard::sign_in(&app).await;
    let overview = dashboard.page("/ops").await;
    assert!(
        overview.contains("id=\"paused\""),
        "the overview shows the pause"
    );
    let notice = dashboard
        .submit("/ops/queues/analyze-document/resume", &[])
        .await;
    assert!(
        notice.contains("queue+analyze-document+resumed"),
        "{notice}"
    );
    app.wait_for_job(held_job, JobStatus::Succeeded).await;
    let (ok, out, _) = app.admin_cli(&["queue", "list"]);
    assert!(ok && out.contains("analyze-document\trunning"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pauses_and_limits_change_alike_through_the_route_the_cli_and_the_dashboard() {
    let app = TestApp::spawn().await;
    let (tenant_b, _) = app.add_tenant("tenant-b").await;
    let dashboard = Dashboard::sign_in(&app).await;

    // Pause from the dashboard, resume from the command line; the route shows both.
    let notice = dashboard
        .submit(&format!("/ops/tenants/{tenant_b}/pause"), &[])
        .await;
    assert!(notice.contains("tenant+paused"), "{notice}");
    let (_, shown) = admin(
        &app,
        Method::GET,
        &format!("/api/admin/tenants/{tenant_b}"),
        None,
    )
    .await;
    assert!(
        shown["tenant"]["processing_paused_at"].is_string(),
        "{shown}"
    );
    let (status, _) = admin(
        &app,
        Method::POST,
        "/api/admin/queues/verify-document/pause",
        None,
    )
    .await;
    assert_eq!(status, 200);
    let metrics = app
        .http
        .get(format!("{}/metrics", app.admin_address))
        .send()
        .await
        .expect("scrape")
        .text()
        .await
        .expect("text");
    assert!(metrics.contains("quire_paused_tenants 1"), "{metrics}");
    assert!(metrics.contains("quire_paused_queues 1"), "{metrics}");
    assert!(
        metrics.contains("quire_queue_paused{queue=\"verify-document\"} 1"),
        "{metrics}"
    );
    let (ok, out, err) = app.admin_cli(&["tenant", "resume", "--tenant", "tenant-b"]);
    assert!(ok && out.contains("paused_at=-"), "{out} {err}");
    let (_, queues) = admin(&app, Method::GET, "/api/admin/queues", None).await;
    let verify = queues["queues"]
        .as_array()
        .and_then(|queues| {
            queues
                .iter()
                .find(|queue| queue["queue"] == "verify-document")
        })
        .cloned()
        .expect("verify-document is listed");
    assert_eq!(verify["paused"], true, "{verify}");

    // Limits: each caller changes what it names and leaves the rest.
    let path = format!("/api/admin/tenants/{}/limits", app.tenant_id);
    let (status, tenant) = admin(
        &app,
        Method::PATCH,
        &path,
        Some(json!({ "share_weight": 5, "max_running_jobs": 10 })),
    )
    .await;
    assert_eq!(status, 200, "{tenant}");
    assert_eq!(tenant["share_weight"], 5);
    assert_eq!(tenant["max_running_jobs"], 10);
    let (ok, out, err) = app.admin_cli(&[
        "tenant",
        "limits",
        "--tenant",
        "tenant-a",
        "--enqueue-rate-per-second",
        "7",
        "--max-running-jobs",
        "default",
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("share_weight=5")
            && out.contains("max_running_jobs=default")
            && out.contains("enqueue_rate_per_second=7"),
        "{out}"
    );
    let notice = dashboard
        .submit(
            &format!("/ops/tenants/{}/limits", app.tenant_id),
            &[("share_weight", "9"), ("enqueue_burst", "40")],
        )
        .await;
    assert!(notice.contains("tenant+limits+set"), "{notice}");
    let (_, shown) = admin(
        &app,
        Method::GET,
        &format!("/api/admin/tenants/{}", app.tenant_id),
        None,
    )
    .await;
    let tenant = &shown["tenant"];
    assert_eq!(tenant["share_weight"], 9, "{tenant}");
    assert_eq!(tenant["max_running_jobs"], Value::Null);
    assert_eq!(tenant["enqueue_rate_per_second"], 7);
    assert_eq!(tenant["enqueue_burst"], 40);
    let (ok, out, _) = app.admin_cli(&["tenant", "show", "--tenant", "tenant-a"]);
    assert!(
        ok && out.contains("share_weight=9") && out.contains("enqueue_burst=40"),
        "{out}"
    );
    let page = dashboard.page("/ops/controls").await;
    assert!(page.contains("weight 9"), "the dashboard shows the limits");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_pause_and_limit_requests_answer_clearly_through_every_caller() {
    let app = TestApp::spawn().await;
    let unknown = Uuid::now_v7();
    for path in [
        format!("/api/admin/tenants/{unknown}/pause"),
        format!("/api/admin/tenants/{unknown}/resume"),
        "/api/admin/queues/no-such-queue/pause".to_owned(),
        "/api/admin/queues/no-such-queue/resume".to_owned(),
    ] {
        let response = app
            .http
            .post(format!("{}{path}", app.address))
            .bearer_auth(app.context.operator_token())
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 404, "{path}");
        assert_eq!(
            response.headers()["content-type"],
            "application/problem+json",
            "{path}"
        );
    }
    let (status, problem) = admin(
        &app,
        Method::PATCH,
        &format!("/api/admin/tenants/{unknown}/limits"),
        Some(json!({ "share_weight": 2 })),
    )
    .await;
    assert_eq!((status, problem["code"].as_str()), (404, Some("not_found")));
    let path = format!("/api/admin/tenants/{}/limits", app.tenant_id);
    for body in [
        json!({ "share_weight": 0 }),
        json!({ "share_weight": 5000 }),
        json!({ "max_running_jobs": 0 }),
        json!({ "enqueue_burst": -1 }),
        json!({}),
    ] {
        let response = app
            .http
            .patch(format!("{}{path}", app.address))
            .bearer_auth(app.context.operator_token())
            .json(&body)
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 422, "{body}");
        assert_eq!(
            response.headers()["content-type"],
            "application/problem+json"
        );
        let problem: Value = response.json().await.expect("json");
        assert_eq!(problem["code"], "invalid_limits", "{problem}");
    }
    let (status, problem) = admin(
        &app,
        Method::PATCH,
        &path,
        Some(json!({ "share_weight": 5000 })),
    )
    .await;
    assert_eq!(status, 422);
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("between 1 and 1000")),
        "{problem}"
    );
    // Nothing changed.
    let (_, shown) = admin(
        &app,
        Method::GET,
        &format!("/api/admin/tenants/{}", app.tenant_id),
        None,
    )
    .await;
    assert_eq!(shown["tenant"]["share_weight"], 1);

    let (ok, _, err) = app.admin_cli(&[
        "tenant",
        "limits",
        "--tenant",
        "tenant-a",
        "--share-weight",
        "5000",
    ]);
    assert!(!ok && err.contains("between 1 and 1000"), "{err}");
    let (ok, _, err) = app.admin_cli(&["queue", "pause", "no-such-queue"]);
    assert!(!ok && err.contains("no queue"), "{err}");
    let (ok, _, err) = app.admin_cli(&["tenant", "pause", "--tenant", "no-such-tenant"]);
    assert!(!ok && err.contains("no tenant"), "{err}");

    let dashboard = Dashboard::sign_in(&app).await;
    let notice = dashboard
        .submit(
            &format!("/ops/tenants/{}/limits", app.tenant_id),
            &[("share_weight", "0")],
        )
        .await;
    assert!(notice.contains("between+1+and+1000"), "{notice}");
    let notice = dashboard
        .submit("/ops/queues/no-such-queue/pause", &[])
        .await;
    assert!(notice.contains("no+such+queue"), "{notice}");
    let notice = dashboard
        .submit(&format!("/ops/tenants/{unknown}/pause"), &[])
        .await;
    assert!(notice.contains("no+such+tenant"), "{notice}");
}
