//! The tenant event log and `GET /api/events`, against real PostgreSQL: the log's order
//! never lets a resuming reader skip an event that commits late; the stream delivers a
//! tenant's events in order and only its own, resumes after Last-Event-ID (or `since`),
//! refuses bad and expired ids before it starts, heartbeats, is woken by the one LISTEN
//! connection, catches up without it, drops a client that stops reading, is capped per
//! tenant and per process, and ends at shutdown. Events are made with
//! `db::tenant_events::record`, as the state changes make them.

use std::collections::BTreeSet;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use futures_util::{Stream, StreamExt};
use quire_api::Application;
use quire_shared::db::event_stream;
use quire_shared::db::tenant_events::{
    self, EventCursor, NewTenantEvent, TenantEvent, TenantEventType,
};
use quire_shared::test_support::{TestContext, eventually};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Barrier;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::helpers::{DEADLINE, TestApp};

async fn connect(context: &TestContext) -> AsyncPgConnection {
    AsyncPgConnection::establish(context.settings.database.url.expose())
        .await
        .expect("connect")
}

fn new_event(tenant_id: Uuid, event_type: TenantEventType, payload: Value) -> NewTenantEvent {
    NewTenantEvent {
        tenant_id,
        event_type,
        subject_id: Uuid::now_v7(),
        payload,
    }
}

async fn record(conn: &mut AsyncPgConnection, tenant_id: Uuid, payload: Value) -> i64 {
    tenant_events::record(
        conn,
        &new_event(tenant_id, TenantEventType::DocumentReady, payload),
    )
    .await
    .expect("record")
}

/// Records one `document.ready` event in a transaction of its own (NOTIFY at commit).
async fn record_now(app: &TestApp, tenant_id: Uuid, payload: Value) -> i64 {
    let mut conn = app.pool.get().await.expect("connection");
    record(&mut conn, tenant_id, payload).await
}

async fn list_all(conn: &mut AsyncPgConnection, tenant_id: Uuid) -> Vec<TenantEvent> {
    tenant_events::list_after(conn, tenant_id, EventCursor::START, 1000)
        .await
        .expect("list")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_holds_a_later_commit_back_until_an_earlier_transaction_ends() {
    let context = TestContext::new().await;
    let (tenant, _) = context
        .provisioned_tenant("log-order", Uuid::now_v7())
        .await;
    let mut first = connect(&context).await;
    let mut second = connect(&context).await;
    let mut reader = connect(&context).await;

    // The first transaction records an event and stays open; a second one records a
    // later event and commits.
    first.batch_execute("BEGIN").await.expect("begin");
    let early = record(&mut first, tenant, json!({ "n": 1 })).await;
    second.batch_execute("BEGIN").await.expect("begin");
    let late = record(&mut second, tenant, json!({ "n": 2 })).await;
    second.batch_execute("COMMIT").await.expect("commit");
    assert!(early < late, "ids are taken in order");

    // The trap: the later event is committed and visible, the earlier one is not yet. A
    // reader that took it now and resumed after it would never see the earlier one.
    let visible: Vec<i64> = diesel_async::RunQueryDsl::load(
        diesel::sql_query("SELECT id FROM tenant_events WHERE tenant_id = $1")
            .bind::<diesel::sql_types::Uuid, _>(tenant),
        &mut reader,
    )
    .await
    .map(|rows: Vec<IdRow>| rows.into_iter().map(|row| row.id).collect())
    .expect("visible rows");
    assert_eq!(visible, vec![late]);
    assert!(
        list_all(&mut reader, tenant).await.is_empty(),
        "the log returns neither event while an older transaction is open"
    );
    let page = event_stream::read_page(&mut reader, tenant, Some(EventCursor::START), 100)
        .await
        .expect("page");
    assert!(page.events.is_empty());
    assert!(page.held_back, "the stream knows to read again soon");

    first.batch_execute("COMMIT").await.expect("commit");
    let both = eventually(DEADLINE, "both events are listed", || {
        let context = &context;
        async move {
            let mut conn = connect(context).await;
            let events = list_all(&mut conn, tenant).await;
            (events.len() == 2).then_some(events)
        }
    })
    .await;
    let ids: Vec<i64> = both.iter().map(|event| event.id).collect();
    assert_eq!(ids, vec![early, late], "in commit-safe order");
    // A reader resuming from the first event gets the second, and nothing after it.
    let resumed = tenant_events::list_after(&mut reader, tenant, EventCursor::of(&both[0]), 100)
        .await
        .expect("resume");
    assert_eq!(resumed, vec![both[1].clone()]);
    let after_last = tenant_events::list_after(&mut reader, tenant, EventCursor::of(&both[1]), 100)
        .await
        .expect("resume");
    assert!(after_last.is_empty());
}

#[derive(diesel::QueryableByName)]
struct IdRow {
    #[diesel(sql_type = diesel::sql_types::Int8)]
    id: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_resuming_from_its_last_event_misses_nothing_under_concurrent_writers() {
    const WRITERS: usize = 6;
    const TRANSACTIONS: usize = 25;
    let context = Arc::new(TestContext::new().await);
    let (tenant, _) = context.provisioned_tenant("log-race", Uuid::now_v7()).await;
    let start = Arc::new(Barrier::new(WRITERS + 1));
    let mut writers = Vec::new();
    for writer in 0..WRITERS {
        let context = Arc::clone(&context);
        let start = Arc::clone(&start);
        writers.push(tokio::spawn(async move {
            let mut conn = connect(&context).await;
            let mut committed = Vec::new();
            start.wait().await;
            for n in 0..TRANSACTIONS {
                conn.batch_execute("BEGIN").await.expect("begin");
                let id = record(&mut conn, tenant, json!({ "writer": writer, "n": n })).await;
                // Transactions of different lengths commit out of id order.
                if n % 3 == writer % 3 {
                    conn.batch_execute("SELECT pg_sleep(0.003)")
                        .await
                        .expect("work");
                }
                if n % 7 == 3 {
                    conn.batch_execute("ROLLBACK").await.expect("rollback");
                } else {
                    conn.batch_execute("COMMIT").await.expect("commit");
                    committed.push(id);
                }
            }
            committed
        }));
    }
    let reading = CancellationToken::new();
    let reader = {
        let context = Arc::clone(&context);
        let reading = reading.clone();
        tokio::spawn(async move {
            let mut conn = connect(&context).await;
            let mut cursor = EventCursor::START;
            let mut seen = Vec::new();
            start.wait().await;
            loop {
                let page = tenant_events::list_after(&mut conn, tenant, cursor, 7)
                    .await
                    .expect("list");
                let caught_up = page.is_empty();
                for event in page {
                    assert!(
                        (event.txid, event.id) > (cursor.txid, cursor.id),
                        "the log went backwards"
                    );
                    cursor = EventCursor::of(&event);
                    seen.push(event.id);
                }
                if caught_up && reading.is_cancelled() {
                    return seen;
                }
                if caught_up {
                    tokio::task::yield_now().await;
                }
            }
        })
    };
    let mut committed = BTreeSet::new();
    for writer in writers {
        committed.extend(writer.await.expect("writer"));
    }
    // Everything is committed: the reader stops once the log (past every older
    // transaction of the cluster) has nothing more for it.
    eventually(DEADLINE, "every committed event is listed", || {
        let context = &context;
        let expected = committed.len();
        async move {
            let mut conn = connect(context).await;
            (list_all(&mut conn, tenant).await.len() == expected).then_some(())
        }
    })
    .await;
    reading.cancel();
    let seen = reader.await.expect("reader");
    let unique: BTreeSet<i64> = seen.iter().copied().collect();
    assert_eq!(unique.len(), seen.len(), "no event was read twice");
    assert_eq!(
        unique, committed,
        "every committed event, no rolled-back one"
    );
}

/// A server-sent events reader over a response body.
struct Sse {
    body: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    buffer: String,
}

#[derive(Debug, Default, Clone, PartialEq)]
struct Message {
    id: Option<String>,
    event: Option<String>,
    data: Option<String>,
    comments: Vec<String>,
}

impl Sse {
    fn new(response: reqwest::Response) -> Self {
        assert_eq!(response.status(), 200);
        assert_eq!(
            response
                .headers()
                .get("content-type")
                .and_then(|value| value.to_str().ok()),
            Some("text/event-stream")
        );
        Self {
            body: Box::pin(response.bytes_stream()),
            buffer: String::new(),
        }
    }

    /// The next message; `None` once the stream ended.
    async fn next(&mut self) -> Option<Message> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut message = Message::default();
                for line in block.lines() {
                    if let Some(comment) = line.strip_prefix(':') {
                        message.comments.push(comment.trim().to_owned());
                    } else if let Some((field, value)) = line.split_once(": ") {
                        let value = Some(value.to_owned());
                        match field {
                            "id" => message.id = value,
                            "event" => message.event = value,
                            "data" => message.data = value,
                            other => panic!("unexpected field {other}"),
                        }
                    }
                }
                return Some(message);
            }
            match tokio::time::timeout(DEADLINE, self.body.next()).await {
                Ok(Some(Ok(chunk))) => self
                    .buffer
                    .push_str(std::str::from_utf8(&chunk).expect("utf-8")),
                Ok(_) => return None,
                Err(_) => panic!("no message within {DEADLINE:?}"),
            }
        }
    }

    /// The next message that is an event (skipping heartbeats and the opening id).
    async fn next_event(&mut self) -> Message {
        loop {
            let message = self.next().await.expect("the stream ended");
            if message.event.is_some() {
                return message;
            }
        }
    }
}

async fn open(app: &TestApp, token: &str, last_event_id: Option<&str>) -> reqwest::Response {
    let mut request = app
        .http
        .get(format!("{}/api/events", app.address))
        .bearer_auth(token)
        .header("accept", "text/event-stream");
    if let Some(id) = last_event_id {
        request = request.header("last-event-id", id);
    }
    request.send().await.expect("events request")
}

async fn spawn_with(change: impl FnOnce(&mut quire_shared::config::Settings)) -> TestApp {
    let mut context = TestContext::new().await;
    change(&mut context.settings);
    TestApp::spawn_in(context).await
}

fn data(message: &Message) -> Value {
    serde_json::from_str(message.data.as_deref().expect("data")).expect("json data")
}

/// The id of the log's first position (before every event): what a client that kept
/// every event since the tenant began would resume from.
fn id_before_everything() -> String {
    hex::encode("e1.0.0")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_delivers_the_tenants_events_in_order_and_resumes_after_the_last_id() {
    // No catch-up within the test: every event arrives by the LISTEN wake-up.
    let app = spawn_with(|settings| settings.events.catch_up_seconds = 3600).await;
    let (other_tenant, _) = app.add_tenant("tenant-b").await;
    let mut stream = Sse::new(open(&app, &app.token, None).await);
    let opening = stream.next().await.expect("opening");
    assert!(opening.id.is_some() && opening.event.is_none() && opening.data.is_none());

    record_now(&app, app.tenant_id, json!({ "n": 1 })).await;
    record_now(&app, other_tenant, json!({ "n": "not yours" })).await;
    let mut conn = app.pool.get().await.expect("connection");
    tenant_events::record(
        &mut conn,
        &new_event(
            app.tenant_id,
            TenantEventType::JobFailed,
            json!({ "n": 2, "error_code": "worker_lost" }),
        ),
    )
    .await
    .expect("record");
    drop(conn);
    record_now(&app, app.tenant_id, json!({ "n": 3 })).await;

    let first = stream.next_event().await;
    let second = stream.next_event().await;
    let third = stream.next_event().await;
    assert_eq!(first.event.as_deref(), Some("document.ready"));
    assert_eq!(data(&first), json!({ "n": 1 }));
    assert_eq!(second.event.as_deref(), Some("job.failed"));
    assert_eq!(
        data(&second),
        json!({ "n": 2, "error_code": "worker_lost" })
    );
    assert_eq!(
        data(&third),
        json!({ "n": 3 }),
        "the other tenant's event never shows"
    );
    drop(stream);

    // Resumed after the first: the second and third again, with the same ids.
    let first_id = first.id.clone().expect("id");
    let mut resumed = Sse::new(open(&app, &app.token, Some(&first_id)).await);
    assert_eq!(resumed.next_event().await, second);
    assert_eq!(resumed.next_event().await, third);
    drop(resumed);
    // `since` does the same for clients that cannot set the header.
    let since = app
        .http
        .get(format!("{}/api/events", app.address))
        .query(&[("since", second.id.clone().expect("id"))])
        .bearer_auth(&app.token)
        .send()
        .await
        .expect("request");
    let mut since = Sse::new(since);
    let opening = since.next().await.expect("opening");
    assert_eq!(
        opening.id, second.id,
        "the stream starts where the client asked"
    );
    assert_eq!(since.next_event().await, third);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_without_a_wake_up_arrives_by_the_catch_up_and_idle_streams_heartbeat() {
    let app = TestApp::spawn().await;
    let mut stream = Sse::new(open(&app, &app.token, None).await);
    stream.next().await.expect("opening");
    // A heartbeat comes on an idle stream.
    let beat = stream.next().await.expect("heartbeat");
    assert_eq!(beat.comments, vec!["keep-alive".to_owned()]);
    assert!(beat.event.is_none() && beat.id.is_none());
    // An event inserted without its NOTIFY (as if the listener had been reconnecting).
    let mut conn = connect(&app.context).await;
    conn.batch_execute(&format!(
        "INSERT INTO tenant_events (tenant_id, event_type, subject_id, payload) \
         VALUES ('{}', 'document.purged', '{}', '{{\"quiet\": true}}')",
        app.tenant_id,
        Uuid::now_v7()
    ))
    .await
    .expect("insert");
    let event = stream.next_event().await;
    assert_eq!(event.event.as_deref(), Some("document.purged"));
    assert_eq!(data(&event), json!({ "quiet": true }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_held_back_behind_an_older_transaction_arrives_when_that_one_ends() {
    let app = spawn_with(|settings| settings.events.catch_up_seconds = 3600).await;
    let mut stream = Sse::new(open(&app, &app.token, None).await);
    stream.next().await.expect("opening");
    // An older writing transaction of anything else stays open while the event commits:
    // the event's wake-up reads nothing yet, and no NOTIFY follows the older one's end.
    let mut older = connect(&app.context).await;
    older
        .batch_execute("BEGIN; SELECT pg_current_xact_id()")
        .await
        .expect("older transaction");
    record_now(&app, app.tenant_id, json!({ "held": true })).await;
    let mut reader = connect(&app.context).await;
    let page = event_stream::read_page(&mut reader, app.tenant_id, Some(EventCursor::START), 10)
        .await
        .expect("page");
    assert!(page.events.is_empty() && page.held_back);
    older.batch_execute("COMMIT").await.expect("commit");
    let event = stream.next_event().await;
    assert_eq!(data(&event), json!({ "held": true }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_expired_and_unauthorised_requests_answer_a_problem_before_the_stream() {
    let app = TestApp::spawn().await;
    let problem = |response: reqwest::Response| async move {
        let status = response.status().as_u16();
        let kind = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert_eq!(kind, "application/problem+json", "{status}");
        let body: Value = response.json().await.expect("problem");
        (status, body["code"].as_str().unwrap_or_default().to_owned())
    };
    let code = |status: u16, code: &str| (status, code.to_owned());

    let anonymous = app
        .http
        .get(format!("{}/api/events", app.address))
        .send()
        .await
        .expect("request");
    assert_eq!(problem(anonymous).await, code(401, "unauthorized"));
    let stranger = app.context.token_for(app.tenant_id, Uuid::now_v7());
    assert_eq!(
        problem(open(&app, &stranger, None).await).await,
        code(403, "not_a_member")
    );
    let beyond = hex::encode(format!("e1.{}.1", i64::MAX - 1));
    let overlong = "ab".repeat(200);
    // An id is taken only as the stream writes it, as the document's pattern says.
    let upper_case = hex::encode("e1.1.1").to_uppercase();
    let leading_zero = hex::encode("e1.01.1");
    for bad in [
        "garbage",
        "6531",
        overlong.as_str(),
        beyond.as_str(),
        upper_case.as_str(),
        leading_zero.as_str(),
    ] {
        assert_eq!(
            problem(open(&app, &app.token, Some(bad)).await).await,
            code(400, "invalid_event_id"),
            "{bad}"
        );
    }
    let bad_since = app
        .http
        .get(format!("{}/api/events?since=nope", app.address))
        .bearer_auth(&app.token)
        .send()
        .await
        .expect("request");
    assert_eq!(problem(bad_since).await, code(400, "invalid_event_id"));
    // An empty Last-Event-ID (EventSource's before its first id) names no position: it
    // does not make a bad `since` pass.
    let bad_since_beside_an_empty_header = app
        .http
        .get(format!("{}/api/events?since=nope", app.address))
        .bearer_auth(&app.token)
        .header("last-event-id", "")
        .send()
        .await
        .expect("request");
    assert_eq!(
        problem(bad_since_beside_an_empty_header).await,
        code(400, "invalid_event_id")
    );
    let html_only = app
        .http
        .get(format!("{}/api/events", app.address))
        .bearer_auth(&app.token)
        .header("accept", "text/html")
        .send()
        .await
        .expect("request");
    assert_eq!(problem(html_only).await, code(406, "not_acceptable"));

    // Three events, read from the log's start; then the first two pass the retention.
    for n in 1..=3 {
        record_now(&app, app.tenant_id, json!({ "n": n })).await;
    }
    let mut stream = Sse::new(open(&app, &app.token, Some(&id_before_everything())).await);
    let ids: Vec<String> = [
        stream.next_event().await,
        stream.next_event().await,
        stream.next_event().await,
    ]
    .into_iter()
    .map(|message| message.id.expect("id"))
    .collect();
    drop(stream);
    let mut conn = app.pool.get().await.expect("connection");
    diesel_async::RunQueryDsl::execute(
        diesel::sql_query(
            "UPDATE tenant_events SET created_at = now() - interval '100 hours' \
             WHERE tenant_id = $1 AND payload->>'n' IN ('1', '2')",
        )
        .bind::<diesel::sql_types::Uuid, _>(app.tenant_id),
        &mut conn,
    )
    .await
    .expect("backdate");
    let retention = app.context.settings.events.retention();
    assert_eq!(
        event_stream::prune(&mut conn, retention, 1000)
            .await
            .expect("prune"),
        2
    );
    let before_everything = id_before_everything();
    for expired in [&ids[0], &before_everything] {
        assert_eq!(
            problem(open(&app, &app.token, Some(expired)).await).await,
            code(410, "event_id_expired"),
            "{expired}"
        );
    }
    // From the last pruned event nothing was missed: the stream resumes.
    let mut resumed = Sse::new(open(&app, &app.token, Some(&ids[1])).await);
    let third = resumed.next_event().await;
    assert_eq!(third.id.as_ref(), Some(&ids[2]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_capped_per_tenant_and_per_process() {
    let app = spawn_with(|settings| {
        settings.events.max_streams_per_tenant = 1;
        settings.events.max_streams = 2;
    })
    .await;
    let (_, token_b) = app.add_tenant("tenant-b").await;
    let (_, token_c) = app.add_tenant("tenant-c").await;
    let held = open(&app, &app.token, None).await;
    assert_eq!(held.status(), 200);
    let second = open(&app, &app.token, None).await;
    assert_eq!(second.status(), 429);
    assert!(second.headers().contains_key("retry-after"));
    let body: Value = second.json().await.expect("problem");
    assert_eq!(body["code"], "too_many_streams");
    let of_b = open(&app, &token_b, None).await;
    assert_eq!(of_b.status(), 200, "another tenant has its own slots");
    let of_c = open(&app, &token_c, None).await;
    assert_eq!(of_c.status(), 503);
    let body: Value = of_c.json().await.expect("problem");
    assert_eq!(body["code"], "event_streams_full");
    // A client that goes away gives its slot back.
    drop(held);
    eventually(DEADLINE, "the closed stream's slot is free", || {
        let app = &app;
        async move {
            let again = open(app, &app.token, None).await;
            (again.status() == 200).then_some(())
        }
    })
    .await;
    drop(of_b);
}

/// A client that sends the request, reads the answer's head and then stops reading,
/// with a small receive buffer.
async fn stalled_client(app: &TestApp) -> tokio::net::TcpStream {
    let address: std::net::SocketAddr = app
        .address
        .trim_start_matches("http://")
        .parse()
        .expect("address");
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("receive buffer");
    let mut client = socket.connect(address).await.expect("connect");
    client
        .write_all(
            format!(
                "GET /api/events HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\n\
                 Accept: text/event-stream\r\n\r\n",
                app.token
            )
            .as_bytes(),
        )
        .await
        .expect("request");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        client.read_exact(&mut byte).await.expect("head");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_dropped_instead_of_buffered() {
    let app = spawn_with(|settings| {
        settings.events.buffer_messages = 4;
        settings.events.slow_client_timeout_ms = 300;
        // The slot it holds is how the test sees it dropped.
        settings.events.max_streams_per_tenant = 1;
    })
    .await;
    let mut stalled = stalled_client(&app).await;
    let filler = "x".repeat(16 * 1024);
    let mut recorded = 0usize;
    let started = tokio::time::Instant::now();
    loop {
        let mut conn = app.pool.get().await.expect("connection");
        conn.batch_execute("BEGIN").await.expect("begin");
        for _ in 0..20 {
            record(&mut conn, app.tenant_id, json!({ "filler": &filler })).await;
        }
        conn.batch_execute("COMMIT").await.expect("commit");
        recorded += 20;
        drop(conn);
        let probe = open(&app, &app.token, None).await;
        if probe.status() == 200 {
            break;
        }
        assert_eq!(
            probe.status(),
            429,
            "the stalled stream still holds its slot"
        );
        assert!(
            started.elapsed() < DEADLINE,
            "the stalled client was never dropped ({recorded} events recorded)"
        );
    }
    // What the stalled client can still read is what sat in the buffers when it was
    // dropped, then the connection ends: far from everything that was recorded.
    let mut received = Vec::new();
    let read = tokio::time::timeout(DEADLINE, stalled.read_to_end(&mut received)).await;
    assert!(read.is_ok(), "the dropped connection ends");
    let delivered = String::from_utf8_lossy(&received)
        .matches("event: document.ready")
        .count();
    assert!(
        delivered < recorded,
        "{delivered} of {recorded} events were held for a client that stopped reading"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_open_streams_and_does_not_wait_for_their_clients() {
    let mut context = TestContext::new().await;
    context.settings.server.host = "127.0.0.1".into();
    context.settings.server.port = 0;
    context.settings.server.admin_listen = String::new();
    let (tenant, token) = context.provisioned_tenant("shutdown", Uuid::now_v7()).await;
    let app = Application::build(context.settings.clone())
        .await
        .expect("build the api");
    let address = format!("http://127.0.0.1:{}/api/events", app.port());
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(app.run_until_stopped(shutdown.clone()));
    let http = reqwest::Client::new();
    let response = http
        .get(&address)
        .bearer_auth(&token)
        .send()
        .await
        .expect("request");
    let mut stream = Sse::new(response);
    stream.next().await.expect("opening");
    let pool = context.pool();
    let mut conn = pool.get().await.expect("connection");
    record(&mut conn, tenant, json!({ "before": "shutdown" })).await;
    assert_eq!(
        data(&stream.next_event().await),
        json!({ "before": "shutdown" })
    );

    shutdown.cancel();
    // actix would wait 30 s for a connection that does not end by itself.
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while stream.next().await.is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "the stream ends at shutdown");
    let stopped = tokio::time::timeout(Duration::from_secs(10), server).await;
    assert!(
        matches!(stopped, Ok(Ok(Ok(())))),
        "the api stops gracefully and promptly: {stopped:?}"
    );
}
