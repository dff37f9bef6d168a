//! The enqueue rate limit per tenant: counted in PostgreSQL, so two API processes on one
//! database share it; over it, 429 problem+json with `Retry-After` and nothing stored;
//! under it, nothing changes. A tenant's own limits override the configuration.

use quire_api::Application;
use quire_shared::test_support::TestContext;
use reqwest::Method;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::helpers::TestApp;
use crate::pauses::admin;

/// Ids nobody has: a bulk request for them costs its budget all the same.
fn ids(count: usize) -> Value {
    json!({ "ids": (0..count).map(|_| Uuid::now_v7()).collect::<Vec<_>>() })
}

/// A second API process on the same database, Redis and storage; stopped on drop.
struct SecondApi {
    address: String,
    _stop: tokio_util::sync::DropGuard,
}

async fn second_api(app: &TestApp) -> SecondApi {
    let mut settings = app.context.settings.clone();
    settings.server.host = "127.0.0.1".into();
    settings.server.port = 0;
    settings.server.admin_listen = String::new();
    let api = Application::build(settings)
        .await
        .expect("build the second api");
    let address = format!("http://127.0.0.1:{}", api.port());
    let stop = CancellationToken::new();
    tokio::spawn(api.run_until_stopped(stop.clone()));
    SecondApi {
        address,
        _stop: stop.drop_guard(),
    }
}

/// Posts a bulk verify of `count` ids to the API at `address`.
async fn bulk_verify(app: &TestApp, address: &str, token: &str, count: usize) -> reqwest::Response {
    app.http
        .post(format!("{address}/api/documents/verify"))
        .bearer_auth(token)
        .json(&ids(count))
        .send()
        .await
        .expect("bulk verify")
}

/// A 429 as the contract says: problem+json `enqueue_rate_limited` with a Retry-After of
/// at least `at_least` seconds; the Retry-After's seconds.
async fn assert_limited(response: reqwest::Response, at_least: u64) -> u64 {
    assert_eq!(response.status(), 429);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    let retry_after: u64 = response.headers()["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("Retry-After in seconds");
    assert!(
        retry_after >= at_least,
        "Retry-After {retry_after} < {at_least}"
    );
    let problem: Value = response.json().await.expect("json");
    assert_eq!(problem["code"], "enqueue_rate_limited", "{problem}");
    assert_eq!(problem["status"], 429);
    retry_after
}

async fn documents_of(app: &TestApp, tenant_id: Uuid) -> i64 {
    use diesel::prelude::*;
    use diesel_async::RunQueryDsl;
    use quire_shared::db::schema::documents;
    let mut conn = app.pool.get().await.expect("connection");
    documents::table
        .filter(documents::tenant_id.eq(tenant_id))
        .count()
        .get_result(&mut conn)
        .await
        .expect("count")
}

/// Waits (up to 10 s) until the tenant's budget has nothing outstanding: its
/// theoretical arrival time is no longer ahead of now. What the tenant took under one
/// rate is still owed under the next; a test that changes the rate and expects the full
/// new burst must first let the old takes pass.
async fn await_budget_refilled(app: &TestApp, tenant_id: Uuid) {
    use diesel::prelude::*;
    use diesel::sql_types::{Bool, Uuid as SqlUuid};
    use diesel_async::RunQueryDsl;
    #[derive(QueryableByName)]
    struct Refilled {
        #[diesel(sql_type = Bool)]
        refilled: bool,
    }
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut conn = app.pool.get().await.expect("connection");
    loop {
        let row: Refilled = diesel::sql_query(
            "SELECT NOT EXISTS (SELECT 1 FROM tenant_enqueue_budgets \
                                WHERE tenant_id = $1 AND tat > now()) AS refilled",
        )
        .bind::<SqlUuid, _>(tenant_id)
        .get_result(&mut conn)
        .await
        .expect("read the budget");
        if row.refilled {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the budget never refilled"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_api_processes_on_one_database_share_a_tenants_enqueue_rate() {
    let mut context = TestContext::new().await;
    // One job a second, a hundred at once: a bulk of 100 empties the budget, and the
    // next 100 would take 100 s, far beyond any slowness of this machine.
    context.settings.enqueue_limit.per_second = 1;
    context.settings.enqueue_limit.burst = 100;
    let app = TestApp::spawn_in(context).await;
    let second = second_api(&app).await;
    let (tenant_b, token_b) = app.add_tenant("tenant-b").await;

    assert_eq!(
        bulk_verify(&app, &app.address, &app.token, 100)
            .await
            .status(),
        202
    );
    // At once (a job costs a second of budget): an upload over the rate, on the other
    // process, is refused before its body is stored.
    let refused = app
        .http
        .post(format!("{}/api/documents", second.address))
        .bearer_auth(&app.token)
        .multipart(
            reqwest::multipart::Form::new().part(
                "file",
                reqwest::multipart::Part::bytes(b"over the rate".to_vec())
                    .file_name("over.txt")
                    .mime_str("text/plain")
                    .expect("mime"),
            ),
        )
        .send()
        .await
        .expect("upload");
    assert_limited(refused, 1).await;
    assert_eq!(documents_of(&app, app.tenant_id).await, 0, "nothing stored");
    // The other process sees the same budget: another hundred would take 100 s.
    let retry_after = assert_limited(
        bulk_verify(&app, &second.address, &app.token, 100).await,
        90,
    )
    .await;
    assert!(retry_after <= 101, "{retry_after}");

    // Another tenant, under its own budget, is not affected on either process.
    let uploaded = app
        .upload_as(&token_b, b"tenant b is under its rate".to_vec(), "b.txt")
        .await;
    assert_eq!(uploaded.status(), 201);
    assert_eq!(
        bulk_verify(&app, &second.address, &token_b, 10)
            .await
            .status(),
        202
    );
    assert_eq!(documents_of(&app, tenant_b).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_own_enqueue_rate_overrides_the_default_and_under_it_nothing_changes() {
    let app = TestApp::spawn().await;
    // Under the default rate: uploads, retries and bulk requests answer as ever.
    let (document_id, _) = app.upload(b"well under the rate").await;
    let (status, answer) = app
        .json_as(
            Method::POST,
            &app.token,
            "/api/documents/reanalyze",
            Some(json!({ "ids": [document_id] })),
        )
        .await;
    assert_eq!(status, 202, "{answer}");

    let (status, tenant) = admin(
        &app,
        Method::PATCH,
        &format!("/api/admin/tenants/{}/limits", app.tenant_id),
        Some(json!({ "enqueue_rate_per_second": 1, "enqueue_burst": 3 })),
    )
    .await;
    assert_eq!(status, 200, "{tenant}");
    // The two jobs above are owed at the new rate too (20 ms at the default's 100 a
    // second); a bulk costing the whole burst passes only once they are paid.
    await_budget_refilled(&app, app.tenant_id).await;
    // A bulk larger than the burst costs the burst: it passes once, then waits.
    assert_eq!(
        bulk_verify(&app, &app.address, &app.token, 50)
            .await
            .status(),
        202
    );
    // At once (a job costs a second of budget): the retry is refused before it is
    // looked at, and so is the next bulk (three seconds away).
    let retry = app
        .post_as(
            &app.token,
            &format!(
                "/api/documents/{document_id}/processing-jobs/{}/retry",
                Uuid::now_v7()
            ),
        )
        .await;
    assert_limited(retry, 1).await;
    assert_limited(bulk_verify(&app, &app.address, &app.token, 50).await, 1).await;

    // Back to the default: the budget is the configuration's again (a full burst of 500
    // at 100 a second covers what the tenant took at 1 a second).
    let (status, tenant) = admin(
        &app,
        Method::PATCH,
        &format!("/api/admin/tenants/{}/limits", app.tenant_id),
        Some(json!({ "enqueue_rate_per_second": null, "enqueue_burst": null })),
    )
    .await;
    assert_eq!(status, 200, "{tenant}");
    assert_eq!(tenant["enqueue_rate_per_second"], Value::Null);
    assert_eq!(
        bulk_verify(&app, &app.address, &app.token, 5)
            .await
            .status(),
        202
    );
}
