//! Statement timeouts per kind of session: every pooled connection carries its kind's
//! `statement_timeout`, and an API request whose statement runs past it answers 503
//! problem+json and gives its connection back healthy. A service's session whose
//! transaction waits on its client (a host cut off the network) is ended by the server,
//! and its locks with it. No kind of session JIT-compiles a plan.

use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::Text;
use diesel_async::{RunQueryDsl, SimpleAsyncConnection};
use quire_shared::db::{self, SessionKind};
use quire_shared::test_support::TestContext;
use reqwest::Method;
use serde_json::Value;

use crate::helpers::TestApp;

#[derive(QueryableByName)]
struct Setting {
    #[diesel(sql_type = Text)]
    statement_timeout: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_connection_of_each_kind_carries_its_statement_timeout() {
    let mut context = TestContext::new().await;
    // Distinct values, none a whole number of seconds (SHOW would print "2s").
    let timeouts = &mut context.settings.database.statement_timeout_ms;
    timeouts.api = 1234;
    timeouts.worker = 2345;
    timeouts.dispatcher = 3456;
    timeouts.admin = 0;
    for (kind, expected) in [
        (SessionKind::Api, "1234ms"),
        (SessionKind::Worker, "2345ms"),
        (SessionKind::Dispatcher, "3456ms"),
        (SessionKind::Admin, "0"),
    ] {
        let pool = db::build_pool_with(&context.settings.database, kind).expect("pool");
        // Twice: a connection handed back to the pool keeps its setting.
        for _ in 0..2 {
            let mut conn = pool.get().await.expect("connection");
            let setting: Setting = diesel::sql_query("SHOW statement_timeout")
                .get_result(&mut conn)
                .await
                .expect("show");
            assert_eq!(setting.statement_timeout, expected, "{kind:?}");
        }
    }
}

#[derive(QueryableByName)]
struct JitSetting {
    #[diesel(sql_type = Text)]
    jit: String,
}

/// The server's default is `jit = on`; a generic plan over a large table passes its cost
/// thresholds and compiles on every execution (docs/benchmarks.md, "Cost at scale").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_kind_of_session_compiles_its_plans() {
    let context = TestContext::new().await;
    for kind in [
        SessionKind::Api,
        SessionKind::Worker,
        SessionKind::Dispatcher,
        SessionKind::Admin,
    ] {
        let pool = db::build_pool_with(&context.settings.database, kind).expect("pool");
        let mut conn = pool.get().await.expect("connection");
        let setting: JitSetting = diesel::sql_query("SHOW jit")
            .get_result(&mut conn)
            .await
            .expect("show");
        assert_eq!(setting.jit, "off", "{kind:?}");
    }
}

#[derive(QueryableByName)]
struct IdleSetting {
    #[diesel(sql_type = Text)]
    idle_in_transaction_session_timeout: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_session_idle_in_its_transaction_is_ended_and_its_locks_freed() {
    let mut context = TestContext::new().await;
    context.settings.database.idle_in_transaction_timeout_ms = 700;
    for (kind, expected) in [
        (SessionKind::Api, "700ms"),
        (SessionKind::Worker, "700ms"),
        (SessionKind::Dispatcher, "700ms"),
        (SessionKind::Admin, "0"),
    ] {
        let pool = db::build_pool_with(&context.settings.database, kind).expect("pool");
        let mut conn = pool.get().await.expect("connection");
        let setting: IdleSetting = diesel::sql_query("SHOW idle_in_transaction_session_timeout")
            .get_result(&mut conn)
            .await
            .expect("show");
        assert_eq!(
            setting.idle_in_transaction_session_timeout, expected,
            "{kind:?}"
        );
    }

    // A worker's session takes a lock in a transaction and then hears nothing more from
    // its client, as when the worker's host loses its link mid-transaction.
    let workers =
        db::build_pool_with(&context.settings.database, SessionKind::Worker).expect("worker pool");
    let mut cut_off = workers.get().await.expect("worker connection");
    cut_off
        .batch_execute("BEGIN; SELECT pg_advisory_xact_lock(4242777)")
        .await
        .expect("lock");
    // Another process waits for that lock; the server ends the idle session and the
    // waiter gets it. Without the timeout it would wait for as long as the client's
    // socket stayed open (here: the whole test).
    let admins = db::build_pool(&context.settings.database).expect("admin pool");
    let mut waiter = admins.get().await.expect("admin connection");
    tokio::time::timeout(
        Duration::from_secs(30),
        waiter
            .batch_execute("SELECT pg_advisory_lock(4242777); SELECT pg_advisory_unlock(4242777)"),
    )
    .await
    .expect("the lock of the idle transaction is freed")
    .expect("lock");
    // The idle session was ended: its next statement fails, as a cut-off host finds
    // when its link comes back (the pool then drops the connection).
    assert!(cut_off.batch_execute("SELECT 1").await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_request_past_its_statement_timeout_answers_503_and_its_connection_stays_healthy() {
    let mut context = TestContext::new().await;
    context.settings.database.statement_timeout_ms.api = 300;
    // One connection: the request after the timeout must reuse the one that timed out.
    context.settings.database.pool_size = Some(1);
    let app = TestApp::spawn_in(context).await;
    // A listing that cannot finish: another session holds the documents table. Without a
    // statement timeout the request would wait for as long as the lock is held.
    let mut holder = app.lock_documents_table().await;

    let response = app
        .http
        .get(format!("{}/api/documents", app.address))
        .bearer_auth(&app.token)
        // Far longer than the timeout: a bound for a broken build, not a speed.
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .expect("the listing answers while the table is locked");
    assert_eq!(response.status(), 503);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    assert_eq!(response.headers()["retry-after"], "5");
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["code"], "database_timeout", "{body}");
    assert!(
        !body.to_string().contains("statement timeout"),
        "no server text reaches the client: {body}"
    );

    holder.batch_execute("ROLLBACK").await.expect("unlock");
    // The pool's one connection went back healthy: the next request runs on it.
    let (status, body) = app
        .json_as(Method::GET, &app.token, "/api/documents", None)
        .await;
    assert_eq!(status, 200, "{body}");
}
