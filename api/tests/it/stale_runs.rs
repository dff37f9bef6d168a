//! A run that lost its job — cancelled, its document trashed and purged, its tenant
//! wiped — writes nothing current: it checks its fence before each object write, writes
//! keys of its own, and only its fenced commit makes them current. Each run is held at a
//! fault point (`fault_points`) while the world changes under it, with a lease long
//! enough that its heartbeat cannot be what stops it.

use std::path::{Path, PathBuf};

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use quire_shared::actions::jobs::{self as job_actions, JobScope};
use quire_shared::db::assets::{self, AssetKind};
use quire_shared::db::schema::assets as assets_table;
use quire_shared::fault_points::{self, Held, Point};
use quire_shared::signing::{DeletionAction, TenantDeletionRequest, new_nonce};
use quire_shared::states::JobStatus;
use quire_shared::test_support::RunningService;
use reqwest::Method;
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::helpers::{DEADLINE, TestApp, uuid_at};

/// Files under `dir` (none when it does not exist).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

fn tenant_dir(app: &TestApp) -> PathBuf {
    app.context
        .data_dir
        .path()
        .join(format!("tenants/{}", app.tenant_id))
}

fn document_dir(app: &TestApp, document_id: Uuid) -> PathBuf {
    tenant_dir(app).join(format!("documents/{document_id}"))
}

async fn asset_keys(app: &TestApp, document_id: Uuid) -> Vec<String> {
    let mut conn = app.pool.get().await.expect("connection");
    assets_table::table
        .filter(assets_table::document_id.eq(document_id))
        .order(assets_table::kind.asc())
        .select(assets_table::storage_key)
        .load(&mut conn)
        .await
        .expect("asset keys")
}

/// A worker whose heartbeat beats every 40 s: only the run's own fence checks can
/// notice, within a test, that its job moved on.
fn start_slow_beating_worker(app: &TestApp) -> RunningService {
    app.start_dispatcher();
    app.start_worker_with(app.settings_with(|settings| settings.worker.lease_seconds = 120))
}

/// Uploads a text document and holds its analysis at `point`.
async fn held_analysis(app: &TestApp, point: Point) -> (Uuid, Uuid, Held, RunningService) {
    let (document_id, job_id) = app.upload(b"a letter written on 2024-03-04").await;
    let mut held = fault_points::hold(point, document_id);
    let worker = start_slow_beating_worker(app);
    tokio::time::timeout(DEADLINE, held.reached())
        .await
        .expect("the analysis reaches the fault point");
    (document_id, job_id, held, worker)
}

async fn cancel(app: &TestApp, job_id: Uuid) {
    let mut conn = app.pool.get().await.expect("connection");
    job_actions::cancel(&mut conn, JobScope::Any, job_id, "cancelled by a test")
        .await
        .expect("cancel");
}

/// Lets the held run go on and waits until it has ended: a drain waits for every run.
async fn release_and_drain(held: Held, worker: RunningService) {
    held.release();
    worker.drain().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_analysis_cancelled_before_it_stores_writes_no_object() {
    let app = TestApp::spawn().await;
    let (document_id, job_id, held, worker) = held_analysis(&app, Point::AnalysisBeforeStore).await;

    cancel(&app, job_id).await;
    release_and_drain(held, worker).await;

    assert_eq!(
        files_under(&document_dir(&app, document_id)),
        Vec::<PathBuf>::new(),
        "no thumbnail or text object"
    );
    assert!(asset_keys(&app, document_id).await.is_empty());
    let job = app.job(job_id).await;
    assert_eq!(job.status, JobStatus::Cancelled);
    assert_eq!(job.error_message.as_deref(), Some("cancelled by a test"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_analysis_cancelled_after_it_stored_deletes_its_objects_and_makes_none_current() {
    let app = TestApp::spawn().await;
    let (document_id, job_id, held, worker) = held_analysis(&app, Point::AnalysisBeforeIndex).await;
    assert_eq!(
        files_under(&document_dir(&app, document_id)).len(),
        2,
        "the run stored its thumbnail and text"
    );

    cancel(&app, job_id).await;
    release_and_drain(held, worker).await;

    assert!(
        asset_keys(&app, document_id).await.is_empty(),
        "none current"
    );
    assert_eq!(
        files_under(&document_dir(&app, document_id)),
        Vec::<PathBuf>::new(),
        "the run deleted what it wrote once its commit found the fence gone"
    );
    assert_eq!(app.job(job_id).await.status, JobStatus::Cancelled);
}

async fn delete_document(app: &TestApp, document_id: Uuid) -> Value {
    let response = app
        .http
        .delete(format!("{}/api/documents/{document_id}", app.address))
        .bearer_auth(&app.token)
        .send()
        .await
        .expect("delete");
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_analysis_whose_document_is_purged_mid_run_leaves_no_object_behind() {
    let app = TestApp::spawn().await;
    let (document_id, analysis_id, held, worker) =
        held_analysis(&app, Point::AnalysisBeforeStore).await;

    delete_document(&app, document_id).await; // trash: cancels the analysis
    let purge = delete_document(&app, document_id).await;
    let purge_id = uuid_at(&purge, "/job/id");
    app.wait_for_job(purge_id, JobStatus::Succeeded).await;
    release_and_drain(held, worker).await;

    assert_eq!(
        files_under(&tenant_dir(&app)),
        Vec::<PathBuf>::new(),
        "nothing of the purged document is stored"
    );
    assert!(asset_keys(&app, document_id).await.is_empty());
    assert_eq!(app.job(analysis_id).await.status, JobStatus::Cancelled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_analysis_whose_tenant_is_wiped_mid_run_leaves_no_object_behind() {
    let app = TestApp::spawn().await;
    let (_, analysis_id, held, worker) = held_analysis(&app, Point::AnalysisBeforeStore).await;

    let request = TenantDeletionRequest::signed(
        app.context.settings.auth.jwt_secret.expose().as_bytes(),
        app.tenant_id,
        "tenant-a",
        DeletionAction::Delete,
        true,
        None,
        new_nonce(),
        OffsetDateTime::now_utc(),
    )
    .expect("sign");
    let (status, body) = app
        .json_as(
            Method::POST,
            &app.context.operator_token(),
            &format!("/api/admin/tenants/{}/deletion", app.tenant_id),
            Some(serde_json::to_value(&request).expect("json")),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    app.wait_for_job(uuid_at(&body, "/job/id"), JobStatus::Succeeded)
        .await;
    release_and_drain(held, worker).await;

    assert_eq!(
        files_under(&tenant_dir(&app)),
        Vec::<PathBuf>::new(),
        "nothing of the wiped tenant is stored"
    );
    assert_eq!(app.job(analysis_id).await.status, JobStatus::Cancelled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_analysis_makes_its_own_objects_current_and_deletes_the_ones_it_replaced() {
    let app = TestApp::spawn().await;
    let (document_id, first_job) = app.upload(b"a letter written on 2024-03-04").await;
    app.start_dispatcher();
    let _worker = app.start_worker();
    app.wait_for_job(first_job, JobStatus::Succeeded).await;
    let first = asset_keys(&app, document_id).await;
    assert_eq!(first.len(), 2);

    let (status, body) = app
        .json_as(
            Method::POST,
            &app.token,
            "/api/documents/reanalyze",
            Some(json!({ "ids": [document_id], "force": true })),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let second_job = uuid_at(&body, "/results/0/job/id");
    app.wait_for_job(second_job, JobStatus::Succeeded).await;

    let second = asset_keys(&app, document_id).await;
    assert_eq!(second.len(), 2);
    for key in &second {
        assert!(!first.contains(key), "a run writes keys of its own: {key}");
    }
    let stored: Vec<PathBuf> = second
        .iter()
        .map(|key| app.context.data_dir.path().join(key))
        .collect();
    assert_eq!(
        files_under(&document_dir(&app, document_id)),
        stored,
        "the replaced objects are deleted, the current ones are there"
    );
    // The thumbnail served is the object the row names.
    let mut conn = app.pool.get().await.expect("connection");
    let version = quire_shared::db::documents::find_document(&mut conn, app.tenant_id, document_id)
        .await
        .expect("query")
        .expect("document")
        .current_version_id
        .expect("version");
    let thumbnail = assets::find(&mut conn, app.tenant_id, version, AssetKind::Thumbnail)
        .await
        .expect("query")
        .expect("thumbnail");
    let served = app
        .get_as(
            &app.token,
            &format!("/api/documents/{document_id}/thumbnail"),
        )
        .await;
    assert_eq!(served.status(), 200);
    let served = served.bytes().await.expect("bytes");
    let named = std::fs::read(app.context.data_dir.path().join(&thumbnail.storage_key))
        .expect("the named object");
    assert_eq!(served.as_ref(), named.as_slice());
}
