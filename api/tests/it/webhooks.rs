//! Webhooks end to end: subscriptions through the API, deliveries made by the real
//! dispatcher and worker to a real HTTP receiver the test starts on loopback (allowlisted
//! in these tests' settings, except where the refusal is what is tested).

use std::time::Duration;

use diesel_async::AsyncConnection;
use quire_shared::db::DbError;
use quire_shared::states::JobStatus;
use quire_shared::test_support::{DEADLINE, TestContext, eventually};
use quire_shared::webhook::signature;
use reqwest::Method;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::{TestApp, uuid_at};
use crate::webhook_receiver::{Answer, Receiver};

/// An app whose webhooks may reach the test's receiver on 127.0.0.1 (only there).
async fn app_allowing_loopback(
    change: impl FnOnce(&mut quire_shared::config::Settings),
) -> TestApp {
    let mut context = TestContext::new().await;
    context.settings.webhooks.allowed_networks = vec!["127.0.0.1/32".to_owned()];
    change(&mut context.settings);
    let app = TestApp::spawn_in(context).await;
    app.start_dispatcher();
    app
}

/// Creates a subscription; answers its id and secret.
async fn subscribe(app: &TestApp, url: &str, types: &[&str]) -> (Uuid, String) {
    let (status, body) = app
        .json_as(
            Method::POST,
            &app.token,
            "/api/webhooks",
            Some(json!({ "url": url, "event_types": types })),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let secret = body["secret"].as_str().expect("secret").to_owned();
    (uuid_at(&body, "/id"), secret)
}

/// Uploads a document and trashes it at once (a `document.trashed` event, written by
/// the API itself); answers the document id.
async fn trash_new_document(app: &TestApp, text: &str) -> Uuid {
    let (document_id, _) = app.upload(text.as_bytes()).await;
    let (status, _) = app
        .json_as(
            Method::DELETE,
            &app.token,
            &format!("/api/documents/{document_id}"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    document_id
}

async fn deliveries(app: &TestApp, webhook_id: Uuid) -> Vec<Value> {
    let (status, body) = app
        .json_as(
            Method::GET,
            &app.token,
            &format!("/api/webhooks/{webhook_id}/deliveries"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["deliveries"].as_array().cloned().unwrap_or_default()
}

/// Waits until the subscription's newest delivery satisfies `done`; returns it.
async fn wait_for_delivery(
    app: &TestApp,
    webhook_id: Uuid,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let done = &done;
    eventually(DEADLINE, what, || async move {
        deliveries(app, webhook_id)
            .await
            .into_iter()
            .next()
            .filter(|delivery| done(delivery))
    })
    .await
}

fn verified(received: &crate::webhook_receiver::Received, secret: &str) -> bool {
    let timestamp: i64 = received.webhook_timestamp.parse().expect("timestamp");
    signature::verify(
        secret,
        &received.webhook_id,
        timestamp,
        &received.body,
        &received.webhook_signature,
    )
}

async fn count_rows(app: &TestApp, sql: &str, tenant_id: Uuid) -> i64 {
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        count: i64,
    }
    use diesel_async::RunQueryDsl;
    let mut conn = app.pool.get().await.expect("connection");
    diesel::sql_query(sql)
        .bind::<diesel::sql_types::Uuid, _>(tenant_id)
        .get_result::<Count>(&mut conn)
        .await
        .expect("count")
        .count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_document_is_delivered_signed_and_the_secret_is_shown_once() {
    let app = app_allowing_loopback(|_| {}).await;
    let _worker = app.start_worker();
    let receiver = Receiver::healthy();
    let (webhook_id, secret) = subscribe(&app, &receiver.url(), &["document.ready"]).await;
    assert!(secret.starts_with("whsec_"), "{secret}");
    let (status, view) = app
        .json_as(
            Method::GET,
            &app.token,
            &format!("/api/webhooks/{webhook_id}"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert!(
        view.get("secret").is_none(),
        "the secret is never shown again: {view}"
    );
    assert_eq!(view["enabled"], true);

    let (document_id, job_id) = app.upload(b"a letter that becomes ready").await;
    app.wait_for_job(job_id, JobStatus::Succeeded).await;

    let received = receiver.wait_for(1).await;
    let first = &received[0];
    assert!(
        verified(first, &secret),
        "the Standard Webhooks signature verifies"
    );
    assert!(first.webhook_id.starts_with("msg_"), "{}", first.webhook_id);
    assert_eq!(first.content_type, "application/json");
    let body: Value = serde_json::from_slice(&first.body).expect("json body");
    assert_eq!(body["type"], "document.ready");
    assert_eq!(body["data"]["document_id"], document_id.to_string());
    assert_eq!(body["data"]["job_id"], job_id.to_string());
    assert!(body["timestamp"].is_string());
    let delivery = wait_for_delivery(&app, webhook_id, "the delivery is delivered", |d| {
        d["status"] == "delivered"
    })
    .await;
    assert_eq!(delivery["attempts"], 1);
    assert_eq!(delivery["response_status"], 200);
    assert_eq!(delivery["response_body"], "answered 200");
    assert_eq!(delivery["message_id"], first.webhook_id.as_str());
    assert_eq!(receiver.received().len(), 1, "one event, one request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_fails_gets_retries_with_the_same_message_until_it_accepts() {
    let app = app_allowing_loopback(|_| {}).await;
    let _worker = app.start_worker();
    let receiver = Receiver::start(vec![Answer::Status(500), Answer::Status(503)], 200);
    let (webhook_id, secret) = subscribe(&app, &receiver.url(), &["document.trashed"]).await;

    let document_id = trash_new_document(&app, "a document trashed").await;

    let delivery = wait_for_delivery(&app, webhook_id, "the delivery is delivered", |d| {
        d["status"] == "delivered"
    })
    .await;
    assert_eq!(delivery["attempts"], 3);
    let received = receiver.received();
    assert_eq!(received.len(), 3);
    assert!(
        received
            .iter()
            .all(|r| r.webhook_id == received[0].webhook_id)
    );
    assert!(received.iter().all(|r| verified(r, &secret)));
    let body: Value = serde_json::from_slice(&received[2].body).expect("json");
    assert_eq!(body["type"], "document.trashed");
    assert_eq!(body["data"]["document_id"], document_id.to_string());
    let (_, view) = app
        .json_as(
            Method::GET,
            &app.token,
            &format!("/api/webhooks/{webhook_id}"),
            None,
        )
        .await;
    assert_eq!(
        view["consecutive_failures"], 0,
        "a success clears the count"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_receiver_hits_the_timeout_and_the_retry_is_delivered() {
    let app = app_allowing_loopback(|_| {}).await;
    let _worker = app.start_worker();
    let receiver = Receiver::start(vec![Answer::Hang, Answer::Hang], 200);
    let (webhook_id, _) = subscribe(&app, &receiver.url(), &["document.trashed"]).await;

    trash_new_document(&app, "a document for a receiver that hangs").await;

    // Each hanging attempt ends by the request timeout (1 s in the test profile) and is
    // recorded; the second hangs a second more, so the first is seen recorded.
    let timed_out = wait_for_delivery(&app, webhook_id, "the first attempt timed out", |d| {
        d["attempts"] == 1
    })
    .await;
    assert_eq!(timed_out["status"], "pending");
    assert_eq!(
        timed_out["last_error"],
        "the receiver did not answer in time"
    );
    assert!(timed_out["response_status"].is_null());
    let delivered = wait_for_delivery(&app, webhook_id, "the retry is delivered", |d| {
        d["status"] == "delivered"
    })
    .await;
    assert_eq!(delivered["attempts"], 3);
    assert_eq!(receiver.received().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_receiver_within_the_timeout_is_delivered_once() {
    let app = app_allowing_loopback(|_| {}).await;
    let _worker = app.start_worker();
    let receiver = Receiver::start(vec![Answer::After(Duration::from_millis(400))], 200);
    let (webhook_id, _) = subscribe(&app, &receiver.url(), &["document.trashed"]).await;

    trash_new_document(&app, "a document for a slow receiver").await;

    let delivered = wait_for_delivery(&app, webhook_id, "the delivery is delivered", |d| {
        d["status"] == "delivered"
    })
    .await;
    assert_eq!(delivered["attempts"], 1);
    assert_eq!(delivered["response_body"], "ok, slowly");
    assert_eq!(receiver.received().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_that_rolls_back_sends_nothing() {
    let app = app_allowing_loopback(|_| {}).await;
    let _worker = app.start_worker();
    let receiver = Receiver::healthy();
    let (webhook_id, _) = subscribe(&app, &receiver.url(), &["document.trashed"]).await;
    let tenant_id = app.tenant_id;

    // A trash whose transaction rolls back after its event (and deliveries) were written.
    let rolled_back = Uuid::now_v7();
    let mut conn = app.pool.get().await.expect("connection");
    let outcome = conn
        .transaction::<(), DbError, _>(async |conn| {
            quire_shared::events::document_trashed(conn, tenant_id, rolled_back, None).await?;
            Err(DbError::from(diesel::result::Error::RollbackTransaction))
        })
        .await;
    assert!(outcome.is_err());
    assert_eq!(
        count_rows(
            &app,
            "SELECT count(*) AS count FROM webhook_deliveries WHERE tenant_id = $1",
            tenant_id
        )
        .await,
        0,
        "the rolled-back change left no delivery"
    );

    // A change that commits afterwards is delivered: by then the first would have been.
    let committed = trash_new_document(&app, "a document trashed for real").await;
    let received = receiver.wait_for(1).await;
    wait_for_delivery(&app, webhook_id, "the delivery is delivered", |d| {
        d["status"] == "delivered"
    })
    .await;
    assert_eq!(received.len(), 1);
    let body: Value = serde_json::from_slice(&received[0].body).expect("json");
    assert_eq!(body["data"]["document_id"], committed.to_string());
    assert_eq!(deliveries(&app, webhook_id).await.len(), 1);
    assert_eq!(
        count_rows(&app, "SELECT count(*) AS count FROM processing_jobs WHERE tenant_id = $1 AND job_type = 'deliver-webhook'", tenant_id).await,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_targets_are_refused_at_creation_and_at_delivery() {
    // The test profile allowlists nothing.
    let app = TestApp::spawn().await;
    app.start_dispatcher();
    let _worker = app.start_worker();
    let receiver = Receiver::healthy();
    let port = receiver.port;
    for (url, code) in [
        (receiver.url(), "webhook_target_refused"),
        (format!("http://[::1]:{port}/"), "webhook_target_refused"),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/"),
            "webhook_target_refused",
        ),
        (
            format!("http://2130706433:{port}/"),
            "webhook_target_refused",
        ),
        (
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "webhook_target_refused",
        ),
        ("http://10.0.0.1/hook".to_owned(), "webhook_target_refused"),
        ("http://[fe80::1]/hook".to_owned(), "webhook_target_refused"),
        ("ftp://example.com/hook".to_owned(), "invalid_webhook_url"),
        (
            "https://user:secret@example.com/hook".to_owned(),
            "invalid_webhook_url",
        ),
        ("/relative/hook".to_owned(), "invalid_webhook_url"),
        (
            format!("https://example.com/{}", "a".repeat(2100)),
            "invalid_webhook_url",
        ),
    ] {
        let (status, body) = app
            .json_as(
                Method::POST,
                &app.token,
                "/api/webhooks",
                Some(json!({ "url": url, "event_types": ["document.trashed"] })),
            )
            .await;
        assert_eq!(
            (status, body["code"].as_str()),
            (422, Some(code)),
            "{url}: {body}"
        );
    }
    let (status, body) = app
        .json_as(
            Method::POST,
            &app.token,
            "/api/webhooks",
            Some(json!({ "url": "https://example.com/hook", "event_types": ["document.eaten"] })),
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("invalid_event_types"))
    );
    let (status, _) = app
        .json_as(
            Method::POST,
            &app.token,
            "/api/webhooks",
            Some(json!({ "url": 42 })),
        )
        .await;
    assert_eq!(status, 400);

    // A host NAME is checked when a delivery resolves it: localhost is loopback.
    let (webhook_id, _) = subscribe(
        &app,
        &format!("http://localhost:{port}/hook"),
        &["document.trashed"],
    )
    .await;
    trash_new_document(&app, "a document whose webhook points home").await;
    let failed = wait_for_delivery(&app, webhook_id, "the delivery is refused", |d| {
        d["status"] == "failed"
    })
    .await;
    assert_eq!(
        failed["last_error"],
        "the URL names a private, loopback or link-local address"
    );
    assert_eq!(receiver.received().len(), 0, "nothing reached the receiver");
    // The delivery's failure is its history's: no `job.failed` event fans out again.
    assert_eq!(
        count_rows(&app, "SELECT count(*) AS count FROM tenant_events WHERE tenant_id = $1 AND event_type = 'job.failed'", app.tenant_id).await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_that_keeps_failing_is_disabled_with_a_reason() {
    let app = app_allowing_loopback(|settings| {
        settings.webhooks.disable_after_failures = 3;
    })
    .await;
    let _worker = app.start_worker();
    let receiver = Receiver::start(Vec::new(), 500);
    let (webhook_id, _) = subscribe(&app, &receiver.url(), &["document.trashed"]).await;

    trash_new_document(&app, "a document for a broken receiver").await;

    let shared = &app;
    let view = eventually(DEADLINE, "the subscription is disabled", || async move {
        let path = format!("/api/webhooks/{webhook_id}");
        let (_, view) = shared
            .json_as(Method::GET, &shared.token, &path, None)
            .await;
        (view["enabled"] == false).then_some(view)
    })
    .await;
    let reason = view["disabled_reason"].as_str().expect("a reason");
    assert!(
        reason.contains("3 failed delivery attempts in a row"),
        "{reason}"
    );
    assert!(view["disabled_at"].is_string());
    let failed = wait_for_delivery(&app, webhook_id, "the delivery failed", |d| {
        d["status"] == "failed"
    })
    .await;
    assert_eq!(failed["attempts"], 3);
    assert_eq!(failed["response_status"], 500);
    assert_eq!(receiver.received().len(), 3);

    // A disabled subscription gets no new deliveries (the fan-out is in the trash's own
    // transaction, so this is settled when the API answers).
    trash_new_document(&app, "a second document").await;
    assert_eq!(deliveries(&app, webhook_id).await.len(), 1);
    let (status, body) = app
        .json_as(
            Method::POST,
            &app.token,
            &format!(
                "/api/webhooks/{webhook_id}/deliveries/{}/redeliver",
                failed["id"].as_str().expect("id")
            ),
            None,
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("webhook_disabled"))
    );

    // Turned on again by its tenant: the reason and count are cleared.
    let (status, view) = app
        .json_as(
            Method::PATCH,
            &app.token,
            &format!("/api/webhooks/{webhook_id}"),
            Some(json!({ "enabled": true })),
        )
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["enabled"], true);
    assert!(view["disabled_reason"].is_null());
    assert_eq!(view["consecutive_failures"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivery_sends_the_same_message_again_and_other_tenants_see_nothing() {
    let app = app_allowing_loopback(|_| {}).await;
    let _worker = app.start_worker();
    let receiver = Receiver::healthy();
    let (webhook_id, secret) = subscribe(&app, &receiver.url(), &["document.trashed"]).await;
    trash_new_document(&app, "a document delivered twice").await;
    let first = wait_for_delivery(&app, webhook_id, "the delivery is delivered", |d| {
        d["status"] == "delivered"
    })
    .await;
    let first_id = first["id"].as_str().expect("id").to_owned();

    let redeliver = format!("/api/webhooks/{webhook_id}/deliveries/{first_id}/redeliver");
    let (status, again) = app
        .json_as(Method::POST, &app.token, &redeliver, None)
        .await;
    assert_eq!(status, 202, "{again}");
    assert_ne!(again["id"], first["id"]);
    assert_eq!(again["message_id"], first["message_id"]);

    let received = receiver.wait_for(2).await;
    assert_eq!(
        received[0].webhook_id, received[1].webhook_id,
        "the same message"
    );
    assert_eq!(received[0].body, received[1].body);
    assert!(received.iter().all(|r| verified(r, &secret)));
    wait_for_delivery(&app, webhook_id, "the redelivery is delivered", |d| {
        d["status"] == "delivered" && d["id"] == again["id"]
    })
    .await;
    assert_eq!(deliveries(&app, webhook_id).await.len(), 2);

    // Another tenant's owner finds none of it.
    let (_, other) = app.add_tenant("tenant-b").await;
    for (method, path) in [
        (Method::GET, format!("/api/webhooks/{webhook_id}")),
        (
            Method::GET,
            format!("/api/webhooks/{webhook_id}/deliveries"),
        ),
        (Method::POST, redeliver.clone()),
        (Method::DELETE, format!("/api/webhooks/{webhook_id}")),
    ] {
        let (status, _) = app.json_as(method.clone(), &other, &path, None).await;
        assert_eq!(status, 404, "{method} {path}");
    }
    let (_, list) = app
        .json_as(Method::GET, &other, "/api/webhooks", None)
        .await;
    assert_eq!(list["webhooks"], json!([]));

    // Deleted: gone with its history.
    let (status, _) = app
        .json_as(
            Method::DELETE,
            &app.token,
            &format!("/api/webhooks/{webhook_id}"),
            None,
        )
        .await;
    assert_eq!(status, 204);
    let (status, _) = app
        .json_as(
            Method::GET,
            &app.token,
            &format!("/api/webhooks/{webhook_id}/deliveries"),
            None,
        )
        .await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_has_at_most_twenty_subscriptions() {
    let app = TestApp::spawn().await;
    for n in 0..quire_shared::actions::webhooks::MAX_SUBSCRIPTIONS {
        subscribe(
            &app,
            &format!("https://hooks.example.com/{n}"),
            &["job.failed"],
        )
        .await;
    }
    let (status, body) = app
        .json_as(
            Method::POST,
            &app.token,
            "/api/webhooks",
            Some(json!({ "url": "https://hooks.example.com/one-more", "event_types": ["job.failed"] })),
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("webhook_limit"))
    );
    let (_, list) = app
        .json_as(Method::GET, &app.token, "/api/webhooks", None)
        .await;
    assert_eq!(
        list["webhooks"].as_array().map(Vec::len),
        Some(quire_shared::actions::webhooks::MAX_SUBSCRIPTIONS)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_state_change_is_announced_once_to_a_subscriber_of_every_type() {
    let app = app_allowing_loopback(|_| {}).await;
    let receiver = Receiver::healthy();
    let all = [
        "document.ready",
        "document.failed",
        "document.trashed",
        "document.purged",
        "job.failed",
    ];
    let (webhook_id, secret) = subscribe(&app, &receiver.url(), &all).await;
    // One document whose bytes vanish before its analysis (it fails, with its job), one
    // that becomes ready and is then trashed and purged.
    let (broken, broken_job) = app.upload(b"bytes that will vanish").await;
    app.context
        .remove_stored(&crate::integrity::stored_key(&app, broken).await)
        .await;
    let (document_id, job_id) = app.upload(b"a document with a whole life").await;
    let _worker = app.start_worker();
    app.wait_for_job(broken_job, JobStatus::Failed).await;
    app.wait_for_job(job_id, JobStatus::Succeeded).await;
    let path = format!("/api/documents/{document_id}");
    let (status, _) = app.json_as(Method::DELETE, &app.token, &path, None).await;
    assert_eq!(status, 200, "trashed");
    let (status, purge) = app.json_as(Method::DELETE, &app.token, &path, None).await;
    assert_eq!(status, 202, "purge queued: {purge}");
    app.wait_for_job(uuid_at(&purge, "/job/id"), JobStatus::Succeeded)
        .await;

    let received = receiver.wait_for(5).await;
    let mut seen: Vec<(String, String)> = received
        .iter()
        .map(|request| {
            assert!(verified(request, &secret));
            let body: Value = serde_json::from_slice(&request.body).expect("json");
            let subject = body["data"]["document_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            (
                body["type"].as_str().unwrap_or_default().to_owned(),
                subject,
            )
        })
        .collect();
    seen.sort();
    let (broken, document) = (broken.to_string(), document_id.to_string());
    let mut expected = vec![
        ("document.failed".to_owned(), broken.clone()),
        ("document.purged".to_owned(), document.clone()),
        ("document.ready".to_owned(), document.clone()),
        ("document.trashed".to_owned(), document),
        ("job.failed".to_owned(), broken),
    ];
    expected.sort();
    assert_eq!(seen, expected);
    let failed_job = received
        .iter()
        .map(|request| serde_json::from_slice::<Value>(&request.body).expect("json"))
        .find(|body| body["type"] == "job.failed")
        .expect("job.failed");
    assert_eq!(failed_job["data"]["job_id"], broken_job.to_string());
    assert_eq!(failed_job["data"]["job_type"], "analyze-document");
    assert_eq!(failed_job["data"]["error_code"], "source_missing");
    let shared = &app;
    eventually(
        DEADLINE,
        "every delivery is recorded delivered",
        || async move {
            let all = deliveries(shared, webhook_id).await;
            (all.len() == 5 && all.iter().all(|d| d["status"] == "delivered")).then_some(())
        },
    )
    .await;
    assert_eq!(
        count_rows(
            &app,
            "SELECT count(*) AS count FROM tenant_events WHERE tenant_id = $1",
            app.tenant_id
        )
        .await,
        5,
        "one event per change"
    );
}
