//! Signed tenant deletion and reset. Valid requests wipe exactly one tenant; every
//! refused one — by the API or, for a job that reached the queue another way, by the
//! worker — leaves every row and every stored byte of the tenant in place.

use std::collections::BTreeMap;

use diesel::sql_types::Uuid as SqlUuid;
use diesel_async::RunQueryDsl;
use quire_shared::db::jobs::{self, NewJob};
use quire_shared::db::{search_indexes, tenants};
use quire_shared::jobs::{BackgroundJob, DeleteTenant};
use quire_shared::signing::{DeletionAction, TenantDeletionRequest, format_issued_at, new_nonce};
use quire_shared::states::{JobStatus, TenantStatus};
use quire_shared::test_support::{eventually, signed_as_v1};
use reqwest::Method;
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::helpers::{DEADLINE, TestApp, uuid_at};

/// Everything of one tenant that a deletion could touch.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Footprint {
    pub(crate) status: Option<TenantStatus>,
    pub(crate) rows: BTreeMap<&'static str, i64>,
    pub(crate) has_index: bool,
    /// Stored objects under the tenant's prefix, with their sizes.
    pub(crate) files: BTreeMap<String, u64>,
}

pub(crate) async fn footprint(app: &TestApp, tenant_id: Uuid) -> Footprint {
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::Int8)]
        count: i64,
    }
    let mut conn = app.pool.get().await.expect("connection");
    let mut rows = BTreeMap::new();
    for table in [
        "documents",
        "document_versions",
        "document_tags",
        "document_tag_removals",
        "tags",
        "tenant_members",
        "capability_sets",
    ] {
        let count: Count = diesel::sql_query(format!(
            "SELECT count(*) AS count FROM {table} WHERE tenant_id = $1"
        ))
        .bind::<SqlUuid, _>(tenant_id)
        .get_result(&mut conn)
        .await
        .expect("count");
        rows.insert(table, count.count);
    }
    let status = tenants::find_tenant(&mut conn, tenant_id)
        .await
        .expect("tenant")
        .map(|tenant| tenant.status);
    let under = format!("tenants/{tenant_id}/");
    let files: BTreeMap<String, u64> = app
        .context
        .stored_objects()
        .await
        .into_iter()
        .filter(|object| object.key.starts_with(&under))
        .map(|object| (object.key, object.size_bytes))
        .collect();
    Footprint {
        status,
        rows,
        has_index: search_indexes::exists(&mut conn, tenant_id)
            .await
            .expect("index"),
        files,
    }
}

/// A provisioned tenant with an owner, two documents (one tagged, one with a tag its user
/// removed) and their files.
pub(crate) async fn populated(app: &TestApp, name: &str) -> (Uuid, String) {
    let (tenant_id, token) = app.context.provisioned_tenant(name, Uuid::now_v7()).await;
    let mut ids = Vec::new();
    for text in ["an invoice of", "a letter to"] {
        let response = app
            .upload_as(&token, format!("{text} {name}").into_bytes(), "doc.txt")
            .await;
        assert_eq!(response.status(), 201);
        let body: Value = response.json().await.expect("json");
        ids.push(uuid_at(&body, "/document/id"));
    }
    let (status, _) = app
        .json_as(
            Method::PATCH,
            &token,
            &format!("/api/documents/{}", ids[0]),
            Some(json!({ "tags": ["tax"] })),
        )
        .await;
    assert_eq!(status, 200);
    // A tag the user took off again: its removal is a row of the tenant's too.
    for tags in [json!(["draft"]), json!([])] {
        let (status, _) = app
            .json_as(
                Method::PATCH,
                &token,
                &format!("/api/documents/{}", ids[1]),
                Some(json!({ "tags": tags })),
            )
            .await;
        assert_eq!(status, 200);
    }
    let print = footprint(app, tenant_id).await;
    assert_eq!(print.files.len(), 2, "{print:?}");
    assert_eq!(print.rows["document_tags"], 1, "{print:?}");
    assert_eq!(print.rows["document_tag_removals"], 1, "{print:?}");
    (tenant_id, token)
}

fn secret(app: &TestApp) -> Vec<u8> {
    app.context
        .settings
        .auth
        .jwt_secret
        .expose()
        .as_bytes()
        .to_vec()
}

pub(crate) fn sign(
    app: &TestApp,
    tenant_id: Uuid,
    name: &str,
    action: DeletionAction,
    remove: bool,
    final_status: Option<TenantStatus>,
    at: OffsetDateTime,
) -> TenantDeletionRequest {
    TenantDeletionRequest::signed(
        &secret(app),
        tenant_id,
        name,
        action,
        remove,
        final_status,
        new_nonce(),
        at,
    )
    .expect("sign")
}

pub(crate) async fn submit(
    app: &TestApp,
    tenant_id: Uuid,
    request: &TenantDeletionRequest,
) -> (u16, Value) {
    app.json_as(
        Method::POST,
        &app.context.operator_token(),
        &format!("/api/admin/tenants/{tenant_id}/deletion"),
        Some(serde_json::to_value(request).expect("json")),
    )
    .await
}

fn seconds(n: i64) -> time::Duration {
    time::Duration::seconds(n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_delete_wipes_one_tenant_and_removes_it() {
    let app = TestApp::spawn().await;
    let (doomed, _) = populated(&app, "doomed").await;
    let (bystander, _) = populated(&app, "bystander").await;
    let bystander_before = footprint(&app, bystander).await;

    let request = sign(
        &app,
        doomed,
        "doomed",
        DeletionAction::Delete,
        true,
        None,
        OffsetDateTime::now_utc(),
    );
    let (status, body) = submit(&app, doomed, &request).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["tenant"]["status"], "deleting");
    let job_id = uuid_at(&body, "/job/id");

    app.start_dispatcher();
    let _worker = app.start_worker();
    app.wait_for_job(job_id, JobStatus::Succeeded).await;

    let after = footprint(&app, doomed).await;
    assert_eq!(after.status, None, "the tenant row is gone");
    assert!(after.rows.values().all(|count| *count == 0), "{after:?}");
    assert!(!after.has_index && after.files.is_empty(), "{after:?}");
    let mut conn = app.pool.get().await.expect("connection");
    let left = jobs::list_tenant_jobs(&mut conn, doomed)
        .await
        .expect("jobs");
    assert!(
        left.iter().any(|job| job.id == job_id),
        "the job row stays as audit"
    );
    assert!(
        !left.iter().any(|job| !job.status.is_terminal()),
        "no job of the tenant is left active"
    );
    // The bystander's documents were analyzed meanwhile (assets added); what it had is
    // all still there.
    let bystander_after = footprint(&app, bystander).await;
    assert_eq!(bystander_after.rows, bystander_before.rows);
    for (file, size) in &bystander_before.files {
        assert_eq!(bystander_after.files.get(file), Some(size), "{file}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_reset_keeps_the_tenant_and_its_members_with_an_empty_index() {
    let app = TestApp::spawn().await;
    let (tenant_id, token) = populated(&app, "resettable").await;
    let request = sign(
        &app,
        tenant_id,
        "resettable",
        DeletionAction::Reset,
        false,
        Some(TenantStatus::Active),
        OffsetDateTime::now_utc(),
    );
    let (status, body) = submit(&app, tenant_id, &request).await;
    assert_eq!(status, 202, "{body}");
    let job_id = uuid_at(&body, "/job/id");
    app.start_dispatcher();
    let _worker = app.start_worker();
    app.wait_for_job(job_id, JobStatus::Succeeded).await;

    let after = footprint(&app, tenant_id).await;
    assert_eq!(after.status, Some(TenantStatus::Active));
    assert!(after.has_index && after.files.is_empty(), "{after:?}");
    assert_eq!(after.rows["documents"] + after.rows["tags"], 0, "{after:?}");
    assert_eq!(
        (after.rows["tenant_members"], after.rows["capability_sets"]),
        (1, 4)
    );
    let response = app
        .upload_as(&token, b"a fresh start".to_vec(), "new.txt")
        .await;
    assert_eq!(
        response.status(),
        201,
        "the owner keeps working after a reset"
    );

    // The same signed request again: its nonce is spent.
    let (status, body) = submit(&app, tenant_id, &request).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("nonce_replayed")),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refused_request_leaves_the_tenant_untouched() {
    let app = TestApp::spawn().await;
    let (tenant_id, _) = populated(&app, "target").await;
    let (other_id, _) = populated(&app, "other").await;
    let before = footprint(&app, tenant_id).await;
    let now = OffsetDateTime::now_utc();
    let good = || {
        sign(
            &app,
            tenant_id,
            "target",
            DeletionAction::Delete,
            true,
            None,
            now,
        )
    };

    let mut cases: Vec<(&str, Uuid, TenantDeletionRequest, u16, &str)> = Vec::new();
    let mut flipped = good();
    let last = flipped.signature.pop().expect("digit");
    flipped.signature.push(if last == 'a' { 'b' } else { 'a' });
    cases.push(("flipped byte", tenant_id, flipped, 403, "signature_invalid"));
    let mut truncated = good();
    truncated.signature.truncate(40);
    cases.push((
        "truncated",
        tenant_id,
        truncated,
        422,
        "signature_malformed",
    ));
    let mut empty = good();
    empty.signature.clear();
    cases.push(("empty", tenant_id, empty, 422, "signature_malformed"));
    let mut non_hex = good();
    non_hex.signature = "g".repeat(64);
    cases.push(("non-hex", tenant_id, non_hex, 422, "signature_malformed"));
    let mut upper = good();
    upper.signature = upper.signature.to_uppercase();
    cases.push(("uppercase", tenant_id, upper, 422, "signature_malformed"));
    let stale = sign(
        &app,
        tenant_id,
        "target",
        DeletionAction::Delete,
        true,
        None,
        now - seconds(301),
    );
    cases.push(("stale", tenant_id, stale, 403, "request_stale"));
    let future = sign(
        &app,
        tenant_id,
        "target",
        DeletionAction::Delete,
        true,
        None,
        now + seconds(60),
    );
    cases.push(("future", tenant_id, future, 403, "request_from_the_future"));
    let for_other = sign(
        &app,
        other_id,
        "other",
        DeletionAction::Delete,
        true,
        None,
        now,
    );
    cases.push((
        "another tenant's proof",
        tenant_id,
        for_other,
        403,
        "signature_invalid",
    ));
    let mut reset_as_delete = sign(
        &app,
        tenant_id,
        "target",
        DeletionAction::Reset,
        false,
        None,
        now,
    );
    reset_as_delete.action = DeletionAction::Delete;
    cases.push((
        "reset proof as delete",
        tenant_id,
        reset_as_delete,
        403,
        "signature_invalid",
    ));
    let mut removing_reset = sign(
        &app,
        tenant_id,
        "target",
        DeletionAction::Reset,
        false,
        None,
        now,
    );
    removing_reset.remove_tenant = true;
    cases.push((
        "reset that removes",
        tenant_id,
        removing_reset,
        422,
        "flags_inconsistent",
    ));
    let wrong_name = sign(
        &app,
        tenant_id,
        "targe",
        DeletionAction::Delete,
        true,
        None,
        now,
    );
    cases.push(("wrong name", tenant_id, wrong_name, 403, "tenant_mismatch"));
    let used = good();
    {
        let mut conn = app.pool.get().await.expect("connection");
        quire_shared::db::nonces::consume(
            &mut conn,
            &used.nonce,
            "tenant-deletion",
            tenant_id,
            Uuid::now_v7(),
        )
        .await
        .expect("spend the nonce");
    }
    cases.push(("replayed nonce", tenant_id, used, 403, "nonce_replayed"));

    for (what, target, request, status, code) in cases {
        let (answered, body) = submit(&app, target, &request).await;
        assert_eq!(
            (answered, body["code"].as_str()),
            (status, Some(code)),
            "{what}: {body}"
        );
        assert_eq!(
            footprint(&app, tenant_id).await,
            before,
            "{what} changed the tenant"
        );
    }

    // A tenant still being created cannot be deleted yet.
    let (status, body) = app
        .json_as(
            Method::POST,
            &app.context.operator_token(),
            "/api/admin/tenants",
            Some(json!({ "name": "unborn", "members": [Uuid::now_v7()] })),
        )
        .await;
    assert_eq!(status, 202);
    let unborn = uuid_at(&body, "/tenant/id");
    let request = sign(
        &app,
        unborn,
        "unborn",
        DeletionAction::Delete,
        true,
        None,
        now,
    );
    let (status, body) = submit(&app, unborn, &request).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("tenant_state")),
        "{body}"
    );

    let mut conn = app.pool.get().await.expect("connection");
    let lifecycle = jobs::list_tenant_jobs(&mut conn, tenant_id)
        .await
        .expect("jobs");
    assert!(
        lifecycle.is_empty(),
        "no deletion was enqueued: {lifecycle:?}"
    );
}

/// Jobs that reached the queue without the API's checks (or whose request went stale on
/// the way) are refused by the worker before it touches anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_refuses_bad_deletion_jobs_before_touching_anything() {
    let app = TestApp::spawn().await;
    let now = OffsetDateTime::now_utc();
    let mut cases = Vec::new();
    for (index, case) in [
        "flipped byte",
        "uppercase",
        "stale",
        "replayed nonce",
        "another tenant's proof",
        "reset proof as delete",
        "tenant not deleting",
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("victim-{index}");
        let (tenant_id, _) = populated(&app, &name).await;
        let good = || {
            sign(
                &app,
                tenant_id,
                &name,
                DeletionAction::Delete,
                true,
                None,
                now,
            )
        };
        let (payload, code) = match case {
            "flipped byte" => {
                let mut request = good();
                let first = request.signature.remove(0);
                request
                    .signature
                    .insert(0, if first == 'f' { 'e' } else { 'f' });
                (request, "signature_invalid")
            }
            "uppercase" => {
                let mut request = good();
                request.signature = request.signature.to_uppercase();
                (request, "signature_malformed")
            }
            "stale" => (
                sign(
                    &app,
                    tenant_id,
                    &name,
                    DeletionAction::Delete,
                    true,
                    None,
                    now - seconds(400),
                ),
                "request_stale",
            ),
            "replayed nonce" => {
                let request = good();
                let mut conn = app.pool.get().await.expect("connection");
                quire_shared::db::nonces::consume(
                    &mut conn,
                    &request.nonce,
                    "tenant-deletion",
                    tenant_id,
                    Uuid::now_v7(),
                )
                .await
                .expect("spend");
                (request, "nonce_replayed")
            }
            "another tenant's proof" => (
                sign(
                    &app,
                    app.tenant_id,
                    "tenant-a",
                    DeletionAction::Delete,
                    true,
                    None,
                    now,
                ),
                "signature_invalid",
            ),
            "reset proof as delete" => {
                let mut request = sign(
                    &app,
                    tenant_id,
                    &name,
                    DeletionAction::Reset,
                    false,
                    None,
                    now,
                );
                request.action = DeletionAction::Delete;
                (request, "signature_invalid")
            }
            _ => (good(), "tenant_state"),
        };
        let mut conn = app.pool.get().await.expect("connection");
        if case != "tenant not deleting" {
            tenants::transition(
                &mut conn,
                tenant_id,
                &[TenantStatus::Active],
                TenantStatus::Deleting,
            )
            .await
            .expect("transition")
            .expect("marked deleting");
        }
        let job = NewJob::new(tenant_id, payload, 3, None);
        let job_id = jobs::enqueue(&mut conn, &job)
            .await
            .expect("enqueue")
            .expect("new")
            .job_id;
        cases.push((
            case,
            tenant_id,
            job_id,
            code,
            footprint(&app, tenant_id).await,
        ));
    }
    // Keep the analyze jobs of the uploads out of the way: only deletions are served.
    let settings = app.settings_with(|settings| {
        settings.worker.queues = vec![DeleteTenant::JOB_TYPE.to_owned()];
    });
    app.start_dispatcher();
    let _worker = app.start_worker_with(settings);
    for (case, tenant_id, job_id, code, before) in cases {
        let job = app.wait_for_job(job_id, JobStatus::Failed).await;
        assert_eq!(job.error_code.as_deref(), Some(code), "{case}");
        assert_eq!(job.attempts, 1, "{case}: a refusal is not retried");
        assert_eq!(
            footprint(&app, tenant_id).await,
            before,
            "{case} changed the tenant"
        );
    }
}

/// `request` with one field changed after it was signed.
fn changed(
    mut request: TenantDeletionRequest,
    change: impl FnOnce(&mut TenantDeletionRequest),
) -> TenantDeletionRequest {
    change(&mut request);
    request
}

/// The request as its signer sent it: a v1 signer knew no `version` field (and a body
/// without it reads as version 1, exactly as one with `"version": 1`).
fn as_sent(request: &TenantDeletionRequest) -> Value {
    let mut body = serde_json::to_value(request).expect("json");
    if request.version == 1 {
        body.as_object_mut().expect("object").remove("version");
    }
    body
}

/// For every field of the signed request, a request for `tenant_id` signed as the API
/// accepts it, then that one field changed, and the code it must be refused with. Each
/// change keeps the flags consistent, so only the signature (or the version) can catch
/// it. The last is the attack on v1 itself: a genuine v1 "keep suspended" request made
/// to remove the tenant, which its v1 signature does not cover.
fn field_flips(
    app: &TestApp,
    tenant_id: Uuid,
    name: &str,
    now: OffsetDateTime,
) -> Vec<(&'static str, TenantDeletionRequest, &'static str)> {
    let delete = |remove: bool| {
        sign(
            app,
            tenant_id,
            name,
            DeletionAction::Delete,
            remove,
            None,
            now,
        )
    };
    let reset_active = || {
        sign(
            app,
            tenant_id,
            name,
            DeletionAction::Reset,
            false,
            Some(TenantStatus::Active),
            now,
        )
    };
    let earlier = format_issued_at(now - seconds(1));
    vec![
        (
            "remove_tenant: a keep-suspended delete made to remove the tenant",
            changed(delete(false), |request| request.remove_tenant = true),
            "signature_invalid",
        ),
        (
            "remove_tenant: a removing delete made to keep the tenant",
            changed(delete(true), |request| request.remove_tenant = false),
            "signature_invalid",
        ),
        (
            "tenant_name",
            changed(delete(false), |request| request.tenant_name.push('x')),
            "signature_invalid",
        ),
        (
            "action: delete made a reset",
            changed(delete(false), |request| {
                request.action = DeletionAction::Reset;
            }),
            "signature_invalid",
        ),
        (
            "action: reset made a delete",
            changed(reset_active(), |request| {
                request.action = DeletionAction::Delete;
            }),
            "signature_invalid",
        ),
        (
            "nonce",
            changed(delete(false), |request| request.nonce = new_nonce()),
            "signature_invalid",
        ),
        (
            "issued_at",
            changed(delete(false), |request| request.issued_at = earlier),
            "signature_invalid",
        ),
        (
            "final_status: none made active",
            changed(delete(false), |request| {
                request.final_status = Some(TenantStatus::Active);
            }),
            "signature_invalid",
        ),
        (
            "final_status: active made none (left suspended)",
            changed(reset_active(), |request| request.final_status = None),
            "signature_invalid",
        ),
        (
            "tenant_id: signed for another tenant with this one's name",
            sign(
                app,
                Uuid::now_v7(),
                name,
                DeletionAction::Delete,
                false,
                None,
                now,
            ),
            "signature_invalid",
        ),
        (
            "version: 2 made 3",
            changed(delete(false), |request| request.version = 3),
            "version_unsupported",
        ),
        (
            "a v1 keep-suspended delete made to remove the tenant",
            changed(
                signed_as_v1(&secret(app), tenant_id, delete(false)),
                |request| request.remove_tenant = true,
            ),
            "version_unsupported",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_with_any_signed_field_changed_after_signing_is_refused() {
    let app = TestApp::spawn().await;
    let (tenant_id, _) = populated(&app, "target").await;
    let before = footprint(&app, tenant_id).await;
    let now = OffsetDateTime::now_utc();

    // Every case is tried before the verdict, so a failure names all the fields that
    // got through.
    let mut wrong = Vec::new();
    for (field, request, code) in field_flips(&app, tenant_id, "target", now) {
        let (status, body) = app
            .json_as(
                Method::POST,
                &app.context.operator_token(),
                &format!("/api/admin/tenants/{tenant_id}/deletion"),
                Some(as_sent(&request)),
            )
            .await;
        let expected = if code == "version_unsupported" {
            422
        } else {
            403
        };
        if (status, body["code"].as_str()) != (expected, Some(code)) {
            wrong.push(format!("{field}: answered {status} {body}"));
        }
        if footprint(&app, tenant_id).await != before {
            wrong.push(format!("{field}: the tenant changed"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    let mut conn = app.pool.get().await.expect("connection");
    let lifecycle = jobs::list_tenant_jobs(&mut conn, tenant_id)
        .await
        .expect("jobs");
    assert!(lifecycle.is_empty(), "nothing was enqueued: {lifecycle:?}");

    // The same request unchanged is accepted: each refusal above was the change's.
    let (status, body) = submit(
        &app,
        tenant_id,
        &sign(
            &app,
            tenant_id,
            "target",
            DeletionAction::Delete,
            false,
            None,
            now,
        ),
    )
    .await;
    assert_eq!(status, 202, "{body}");
}

/// The worker's own check catches the same changes in a job that reached the queue
/// without the API (inserted directly), before it touches anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_job_with_any_signed_field_changed_is_refused_by_the_worker() {
    let app = TestApp::spawn().await;
    let now = OffsetDateTime::now_utc();
    let count = field_flips(&app, Uuid::nil(), "", now).len();
    let mut cases = Vec::new();
    for index in 0..count {
        let name = format!("victim-{index}");
        let (tenant_id, _) = populated(&app, &name).await;
        let (field, payload, code) = field_flips(&app, tenant_id, &name, now)
            .into_iter()
            .nth(index)
            .expect("case");
        let mut conn = app.pool.get().await.expect("connection");
        tenants::transition(
            &mut conn,
            tenant_id,
            &[TenantStatus::Active],
            TenantStatus::Deleting,
        )
        .await
        .expect("transition")
        .expect("marked deleting");
        let unversioned = payload.version == 1;
        let job_id = jobs::enqueue(&mut conn, &NewJob::new(tenant_id, payload, 3, None))
            .await
            .expect("enqueue")
            .expect("new")
            .job_id;
        if unversioned {
            // As a v1 API queued it, before the field existed (nothing runs yet).
            diesel::sql_query(
                "UPDATE processing_jobs SET payload = payload - 'version' WHERE id = $1",
            )
            .bind::<SqlUuid, _>(job_id)
            .execute(&mut conn)
            .await
            .expect("strip the version");
        }
        cases.push((
            field,
            tenant_id,
            job_id,
            code,
            footprint(&app, tenant_id).await,
        ));
    }
    let settings = app.settings_with(|settings| {
        settings.worker.queues = vec![DeleteTenant::JOB_TYPE.to_owned()];
    });
    app.start_dispatcher();
    let _worker = app.start_worker_with(settings);
    let mut wrong = Vec::new();
    for (field, tenant_id, job_id, code, before) in cases {
        let job = eventually(DEADLINE, &format!("the job of {field} ends"), || async {
            let job = app.job(job_id).await;
            job.status.is_terminal().then_some(job)
        })
        .await;
        if (job.status, job.error_code.as_deref(), job.attempts)
            != (JobStatus::Failed, Some(code), 1)
        {
            wrong.push(format!(
                "{field}: ended {} ({:?}) after {} attempts",
                job.status, job.error_code, job.attempts
            ));
        }
        if footprint(&app, tenant_id).await != before {
            wrong.push(format!("{field}: the tenant changed"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
