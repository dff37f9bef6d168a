//! A tenant wipe against writes in flight. The middleware checks the tenant's state when
//! a request starts; a write whose body is still on the way when the tenant is reset or
//! deleted must be refused when it finally commits (403 problem+json, nothing left
//! behind), and the removal of a tenant must never fail on a row that landed late.
//!
//! Each race is played out with real concurrency: the request body comes through a
//! channel the test holds open, and the test waits for conditions (a partial file in the
//! store, the caller resolved, a backend waiting for a lock), never for time.

use std::path::Path;

use bytes::Bytes;
use diesel::sql_types::{Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use quire_shared::signing::DeletionAction;
use quire_shared::states::{JobStatus, TenantStatus};
use quire_shared::test_support::{TestContext, eventually};
use reqwest::header::CONTENT_TYPE;
use serde_json::Value;
use time::OffsetDateTime;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::helpers::{DEADLINE, TestApp, uuid_at};
use crate::tenant_deletion::{footprint, populated, sign, submit};

type Chunks = mpsc::Sender<Result<Bytes, std::io::Error>>;

/// A request whose body the test sends piece by piece.
struct HeldRequest {
    chunks: Chunks,
    response: JoinHandle<reqwest::Response>,
}

impl HeldRequest {
    /// Starts `POST path` with `content_type` and sends `first`; the body stays open.
    async fn start(
        app: &TestApp,
        token: &str,
        path: &str,
        content_type: &str,
        first: Vec<u8>,
    ) -> Self {
        let (chunks, receiver) = mpsc::channel::<Result<Bytes, std::io::Error>>(4);
        let body = futures_util::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|chunk| (chunk, receiver))
        });
        let request = app
            .http
            .post(format!("{}{path}", app.address))
            .bearer_auth(token)
            .header(CONTENT_TYPE, content_type)
            .body(reqwest::Body::wrap_stream(body));
        let response = tokio::spawn(async move { request.send().await.expect("held request") });
        chunks.send(Ok(Bytes::from(first))).await.expect("send");
        Self { chunks, response }
    }

    /// Sends the rest of the body, ends it, and answers the status and the problem.
    async fn finish(self, rest: Vec<u8>) -> (u16, Option<String>, Value) {
        self.chunks.send(Ok(Bytes::from(rest))).await.expect("send");
        drop(self.chunks);
        answer(self.response).await
    }
}

async fn answer(response: JoinHandle<reqwest::Response>) -> (u16, Option<String>, Value) {
    let response = tokio::time::timeout(DEADLINE, response)
        .await
        .expect("the request is answered")
        .expect("request task");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let text = response.text().await.expect("body");
    (
        status,
        content_type,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

const BOUNDARY: &str = "quire-held-upload";

/// The multipart head of a text upload and its first kilobyte: enough for the sniffer, so
/// the server starts storing the file.
fn upload_head() -> Vec<u8> {
    let mut head = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"held.txt\"\r\n\
         Content-Type: text/plain\r\n\r\n"
    )
    .into_bytes();
    head.extend("a letter that takes its time. ".repeat(40).into_bytes());
    head
}

fn upload_tail() -> Vec<u8> {
    format!("and its last words.\r\n--{BOUNDARY}--\r\n").into_bytes()
}

async fn start_held_upload(app: &TestApp, token: &str) -> HeldRequest {
    HeldRequest::start(
        app,
        token,
        "/api/documents",
        &format!("multipart/form-data; boundary={BOUNDARY}"),
        upload_head(),
    )
    .await
}

fn partial_files(dir: &Path, found: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            partial_files(&path, found);
        } else if entry.file_name().to_string_lossy().starts_with(".partial-") {
            found.push(path.display().to_string());
        }
    }
}

/// Files the store is still writing, anywhere under its root.
fn partials(app: &TestApp) -> Vec<String> {
    let mut found = Vec::new();
    partial_files(app.context.data_dir.path(), &mut found);
    found
}

/// Waits until the server streams the held upload into the store: the request is past
/// the middleware, which saw the tenant active.
async fn wait_until_storing(app: &TestApp) {
    eventually(DEADLINE, "the held upload is being stored", || async {
        (!partials(app).is_empty()).then_some(())
    })
    .await;
}

/// Signs and submits a reset or deletion of `tenant_id`, serves it, and waits for the
/// wipe to succeed; answers the job's attempts.
async fn wipe(
    app: &TestApp,
    tenant_id: Uuid,
    name: &str,
    action: DeletionAction,
    remove: bool,
    final_status: Option<TenantStatus>,
) -> i32 {
    let request = sign(
        app,
        tenant_id,
        name,
        action,
        remove,
        final_status,
        OffsetDateTime::now_utc(),
    );
    let (status, body) = submit(app, tenant_id, &request).await;
    assert_eq!(status, 202, "{body}");
    let job_id = uuid_at(&body, "/job/id");
    app.start_dispatcher();
    let _worker = app.start_worker();
    app.wait_for_job(job_id, JobStatus::Succeeded)
        .await
        .attempts
}

fn assert_refused(answered: &(u16, Option<String>, Value), code: &str) {
    let (status, content_type, body) = answered;
    assert_eq!(
        (*status, body["code"].as_str()),
        (403, Some(code)),
        "the late write is refused: {body}"
    );
    assert_eq!(content_type.as_deref(), Some("application/problem+json"));
}

/// An upload whose body is held open across a wipe: the middleware let it in while the
/// tenant was active; it must not commit after the wipe. Answers what it was answered.
async fn upload_across(
    app: &TestApp,
    action: DeletionAction,
    remove: bool,
    final_status: Option<TenantStatus>,
) -> (Uuid, (u16, Option<String>, Value)) {
    let name = "racing";
    let (tenant_id, token) = app.context.provisioned_tenant(name, Uuid::now_v7()).await;
    let held = start_held_upload(app, &token).await;
    wait_until_storing(app).await;

    let attempts = wipe(app, tenant_id, name, action, remove, final_status).await;
    assert_eq!(attempts, 1, "the wipe succeeds at its first attempt");
    let answered = held.finish(upload_tail()).await;

    let after = footprint(app, tenant_id).await;
    assert_eq!(after.rows["documents"], 0, "no document: {after:?}");
    assert_eq!(after.rows["document_versions"], 0, "no version: {after:?}");
    assert!(after.files.is_empty(), "no file: {after:?}");
    assert!(
        partials(app).is_empty(),
        "no partial file: {:?}",
        partials(app)
    );
    (tenant_id, answered)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_held_open_across_a_reset_is_refused_and_leaves_nothing() {
    let app = TestApp::spawn().await;
    let (tenant_id, answered) = upload_across(
        &app,
        DeletionAction::Reset,
        false,
        Some(TenantStatus::Active),
    )
    .await;
    // The tenant is active again, but the upload was let in before its reset.
    assert_refused(&answered, "tenant_unavailable");
    let after = footprint(&app, tenant_id).await;
    assert_eq!(after.status, Some(TenantStatus::Active));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_held_open_across_a_delete_is_refused_and_leaves_nothing() {
    let app = TestApp::spawn().await;
    let (tenant_id, answered) = upload_across(&app, DeletionAction::Delete, false, None).await;
    // A kept tenant is left suspended by default.
    assert_refused(&answered, "tenant_suspended");
    let after = footprint(&app, tenant_id).await;
    assert_eq!(after.status, Some(TenantStatus::Suspended));
    assert_eq!(after.rows["tenant_members"], 0, "{after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_held_open_across_a_removing_delete_is_refused_and_the_tenant_is_gone() {
    let app = TestApp::spawn().await;
    let (tenant_id, answered) = upload_across(&app, DeletionAction::Delete, true, None).await;
    assert_refused(&answered, "tenant_unavailable");
    let after = footprint(&app, tenant_id).await;
    assert_eq!(after.status, None, "the tenant is removed: {after:?}");
    assert!(after.rows.values().all(|count| *count == 0), "{after:?}");
}

#[derive(diesel::QueryableByName)]
struct Now {
    #[diesel(sql_type = Timestamptz)]
    now: OffsetDateTime,
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::Int8)]
    count: i64,
}

/// Waits until a session finished resolving a caller (the middleware's query) after
/// `since`, on the database's clock: the held request is past the middleware.
async fn wait_until_resolved(app: &TestApp, since: OffsetDateTime) {
    eventually(
        DEADLINE,
        "the api resolved the held request's caller",
        || async {
            let mut conn = app.pool.get().await.expect("connection");
            let found: Count = diesel::sql_query(
                "SELECT count(*) AS count FROM pg_stat_activity \
             WHERE datname = current_database() AND state = 'idle' AND state_change > $1 \
               AND query LIKE $2",
            )
            .bind::<Timestamptz, _>(since)
            .bind::<Text, _>("%LEFT JOIN tenant_members m ON m.tenant_id = t.id%")
            .get_result(&mut conn)
            .await
            .expect("activity");
            (found.count > 0).then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_added_across_a_delete_is_refused_and_does_not_survive_it() {
    let app = TestApp::spawn().await;
    let name = "crowded";
    let (tenant_id, token) = app.context.provisioned_tenant(name, Uuid::now_v7()).await;
    let newcomer = Uuid::now_v7();
    let since = {
        let mut conn = app.pool.get().await.expect("connection");
        diesel::sql_query("SELECT clock_timestamp() AS now")
            .get_result::<Now>(&mut conn)
            .await
            .expect("now")
            .now
    };
    let held = HeldRequest::start(
        &app,
        &token,
        "/api/members",
        "application/json",
        format!("{{\"user_id\": \"{newcomer}\", ").into_bytes(),
    )
    .await;
    wait_until_resolved(&app, since).await;

    // Kept and active again: the old members are gone, and so must the newcomer be.
    let attempts = wipe(
        &app,
        tenant_id,
        name,
        DeletionAction::Delete,
        false,
        Some(TenantStatus::Active),
    )
    .await;
    assert_eq!(attempts, 1);
    let answered = held.finish(b"\"capability_set\": \"user\"}".to_vec()).await;

    assert_refused(&answered, "tenant_unavailable");
    let after = footprint(&app, tenant_id).await;
    assert_eq!(after.status, Some(TenantStatus::Active));
    assert_eq!(after.rows["tenant_members"], 0, "{after:?}");
}

/// Whatever writes a row in the window between the wipe and the removal (here a row
/// inserted directly, as a writer that does not re-check would), the removal takes it
/// along: the tenant is removed at the first attempt, never left `deleting`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_that_lands_after_the_wipe_does_not_keep_a_removed_tenant_deleting() {
    let app = TestApp::spawn().await;
    let name = "late";
    let (tenant_id, _) = populated(&app, name).await;

    // A share lock on the tenant row holds the removal back (it needs the row for
    // itself) without holding anything else back: inserting a row that references the
    // tenant needs only a compatible lock.
    let url = app.context.settings.database.url.expose().to_owned();
    let mut holder = AsyncPgConnection::establish(&url).await.expect("connect");
    diesel::sql_query("BEGIN")
        .execute(&mut holder)
        .await
        .expect("begin");
    diesel::sql_query("SELECT id FROM tenants WHERE id = $1 FOR KEY SHARE")
        .bind::<SqlUuid, _>(tenant_id)
        .execute(&mut holder)
        .await
        .expect("hold the tenant row");

    let request = sign(
        &app,
        tenant_id,
        name,
        DeletionAction::Delete,
        true,
        None,
        OffsetDateTime::now_utc(),
    );
    let (status, body) = submit(&app, tenant_id, &request).await;
    assert_eq!(status, 202, "{body}");
    let job_id = uuid_at(&body, "/job/id");
    let settings = app.settings_with(|settings| {
        settings.worker.queues = vec!["delete-tenant".to_owned()];
    });
    app.start_dispatcher();
    let _worker = app.start_worker_with(settings);
    eventually(DEADLINE, "the removal waits for the tenant row", || async {
        let mut conn = app.pool.get().await.expect("connection");
        let waiting: Count = diesel::sql_query(
            "SELECT count(*) AS count FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .get_result(&mut conn)
        .await
        .expect("activity");
        (waiting.count > 0).then_some(())
    })
    .await;

    let mut conn = app.pool.get().await.expect("connection");
    diesel::sql_query(
        "INSERT INTO documents (id, tenant_id, title, status) VALUES ($1, $2, 'late', 'PENDING')",
    )
    .bind::<SqlUuid, _>(Uuid::now_v7())
    .bind::<SqlUuid, _>(tenant_id)
    .execute(&mut conn)
    .await
    .expect("a late row");
    diesel::sql_query("COMMIT")
        .execute(&mut holder)
        .await
        .expect("release");

    let job = app.wait_for_job(job_id, JobStatus::Succeeded).await;
    assert_eq!(job.attempts, 1, "the removal did not fail on the late row");
    let after = footprint(&app, tenant_id).await;
    assert_eq!(after.status, None, "the tenant is removed: {after:?}");
    assert!(after.rows.values().all(|count| *count == 0), "{after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_body_that_stops_arriving_answers_408_and_leaves_nothing() {
    let mut context = TestContext::new().await;
    context.settings.server.upload_read_timeout_ms = 300;
    let app = TestApp::spawn_in(context).await;
    let held = start_held_upload(&app, &app.token).await;
    // The client never sends another byte, and never closes the body.
    let answered = answer(held.response).await;
    drop(held.chunks);

    let (status, content_type, body) = answered;
    assert_eq!(
        (status, body["code"].as_str()),
        (408, Some("upload_timeout")),
        "{body}"
    );
    assert_eq!(content_type.as_deref(), Some("application/problem+json"));
    let after = footprint(&app, app.tenant_id).await;
    assert_eq!(after.rows["documents"], 0, "{after:?}");
    assert!(after.files.is_empty(), "{after:?}");
    assert!(partials(&app).is_empty(), "{:?}", partials(&app));
}

/// Every action that writes a tenant's data, called for a caller let in one generation
/// ago (the tenant was reset since and is active again), is refused in its own
/// transaction and changes nothing; the same actions for the current generation work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_of_a_caller_let_in_before_a_wipe_is_refused() {
    use quire_shared::actions::ActionError;
    use quire_shared::actions::documents::{self as document_actions, DocumentCaller, LabelEdit};
    use quire_shared::actions::jobs::{self as job_actions, JobScope};
    use quire_shared::actions::members as member_actions;
    use quire_shared::db::documents::DocumentEdit;
    use quire_shared::db::tenants::Refused;
    use quire_shared::permissions::CapabilitySet;

    let app = TestApp::spawn().await;
    let (document_id, job_id) = app.upload(b"a document of an old generation").await;
    let mut conn = app.pool.get().await.expect("connection");
    // The upload's analysis failed (nothing serves it here): a retry has work to do.
    diesel::sql_query("UPDATE processing_jobs SET status = 'FAILED' WHERE id = $1")
        .bind::<SqlUuid, _>(job_id)
        .execute(&mut conn)
        .await
        .expect("fail the job");
    let owner: Uuid =
        diesel::sql_query("SELECT user_id AS id FROM tenant_members WHERE tenant_id = $1 LIMIT 1")
            .bind::<SqlUuid, _>(app.tenant_id)
            .get_result::<IdRow>(&mut conn)
            .await
            .expect("owner")
            .id;
    // As a reset leaves it: active again, one generation on.
    diesel::sql_query("UPDATE tenants SET generation = generation + 1 WHERE id = $1")
        .bind::<SqlUuid, _>(app.tenant_id)
        .execute(&mut conn)
        .await
        .expect("a new generation");

    let caller = |generation| DocumentCaller {
        tenant_id: app.tenant_id,
        tenant_generation: generation,
        user_id: owner,
        configured_attempts: 3,
        request_id: None,
    };
    let stale = caller(0);
    let scope = JobScope::Document {
        tenant_id: app.tenant_id,
        generation: 0,
        document_id,
    };
    let renamed = DocumentEdit {
        title: Some("renamed".to_owned()),
        issued_at: None,
    };
    let tagged = LabelEdit {
        tags: Some(vec!["late".to_owned()]),
        correspondent: None,
    };
    let tenant = stale.tenant_write();
    let newcomer = Uuid::now_v7();
    let outcomes: Vec<(&str, Result<(), ActionError>)> = vec![
        (
            "edit",
            document_actions::edit(&mut conn, &stale, document_id, &renamed, &tagged)
                .await
                .map(drop),
        ),
        (
            "reanalyze",
            document_actions::reanalyze(&mut conn, &stale, &[document_id], true)
                .await
                .map(drop),
        ),
        (
            "verify",
            document_actions::verify(&mut conn, &stale, &[document_id])
                .await
                .map(drop),
        ),
        (
            "retry",
            job_actions::retry(&mut conn, scope, job_id, 3)
                .await
                .map(drop),
        ),
        (
            "cancel",
            job_actions::cancel(&mut conn, scope, job_id, "late")
                .await
                .map(drop),
        ),
        (
            "add a member",
            member_actions::add(&mut conn, &tenant, newcomer, CapabilitySet::User)
                .await
                .map(drop),
        ),
        (
            "change a member",
            member_actions::change(&mut conn, &tenant, owner, CapabilitySet::Owner)
                .await
                .map(drop),
        ),
        (
            "remove a member",
            member_actions::remove(&mut conn, &tenant, owner)
                .await
                .map(drop),
        ),
        (
            "trash",
            document_actions::delete(&mut conn, &stale, document_id)
                .await
                .map(drop),
        ),
    ];
    let before = footprint(&app, app.tenant_id).await;
    let wrong: Vec<String> = outcomes
        .into_iter()
        .filter(|(_, outcome)| {
            !matches!(
                outcome,
                Err(ActionError::TenantRefused(Refused(Some(
                    TenantStatus::Active
                ))))
            )
        })
        .map(|(what, outcome)| format!("{what}: {outcome:?}"))
        .collect();
    assert!(wrong.is_empty(), "not refused: {wrong:#?}");
    let job = app.job(job_id).await;
    assert_eq!(job.status, JobStatus::Failed, "the job is untouched");

    // The current generation writes; a trashed document's restore is refused alike.
    let current = caller(1);
    document_actions::delete(&mut conn, &current, document_id)
        .await
        .expect("trash in the current generation");
    let refused = document_actions::restore(&mut conn, &stale.tenant_write(), document_id).await;
    assert!(
        matches!(refused, Err(ActionError::TenantRefused(_))),
        "{refused:?}"
    );
    document_actions::restore(&mut conn, &current.tenant_write(), document_id)
        .await
        .expect("restore in the current generation");
    assert_eq!(footprint(&app, app.tenant_id).await.rows, before.rows);
}

#[derive(diesel::QueryableByName)]
struct IdRow {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
}
