//! Scans as they come off a feeder: turned a quarter, a half or three quarters and 3°
//! askew, as PNG and as an image-only PDF. Each becomes READY with its words found, its
//! date read and an upright thumbnail, and has a searchable archive copy
//! (`GET …/archive`: a PDF whose text `pdftotext` reads, every page of it). A document
//! with a text layer has none, nor a scan longer than OCR reads (404 problem+json), and
//! purge and tenant deletion take the copy with them.

use std::process::Command;
use std::time::Duration;

use quire_shared::db::assets::{self, AssetKind};
use quire_shared::db::documents;
use quire_shared::signing::DeletionAction;
use quire_shared::states::{JobStatus, TenantStatus};
use quire_shared::test_support::eventually;
use reqwest::Method;
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::fixtures;
use crate::helpers::{TestApp, uuid_at};
use crate::tenant_deletion::{sign, submit};

/// Waits for an analysis to succeed. Longer than `wait_for_job`'s deadline: each scan is
/// read by three tesseract runs, and the whole suite shares two cores.
async fn analyzed(app: &TestApp, job_id: Uuid) -> quire_shared::db::jobs::Job {
    let job = eventually(
        Duration::from_secs(240),
        "the analysis has ended",
        || async {
            let job = app.job(job_id).await;
            job.status.is_terminal().then_some(job)
        },
    )
    .await;
    assert_eq!(job.status, JobStatus::Succeeded, "{job:?}");
    job
}

fn lines(word: &str) -> Vec<String> {
    vec![
        "City Library of Wombatville".to_owned(),
        "London, 2 February 2023".to_owned(),
        format!("Dear reader, your {word} encyclopedia is overdue."),
        "Please return it to the front desk this month.".to_owned(),
        "Opening hours are Monday to Friday, nine to five.".to_owned(),
    ]
}

fn scan(word: &str, quarter_turns: u8, skew_degrees: f64) -> Vec<u8> {
    let lines = lines(word);
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    fixtures::turned_scan(&lines, quarter_turns, skew_degrees)
}

async fn upload(app: &TestApp, token: &str, bytes: Vec<u8>, filename: &str) -> (Uuid, Uuid) {
    let response = app.upload_as(token, bytes, filename).await;
    assert_eq!(response.status(), 201, "{filename}");
    let body: Value = response.json().await.expect("json");
    (uuid_at(&body, "/document/id"), uuid_at(&body, "/job/id"))
}

async fn search(app: &TestApp, word: &str) -> Vec<Uuid> {
    let (status, body) = app
        .json_as(
            Method::GET,
            &app.token,
            &format!("/api/documents/search?q={word}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["documents"]
        .as_array()
        .map(|hits| hits.iter().map(|hit| uuid_at(hit, "/id")).collect())
        .unwrap_or_default()
}

/// Where the ink of a thumbnail lies, as shares of its width and height from the top
/// left: each pixel weighs by its darkness.
fn ink_centre(png: &[u8]) -> (f64, f64) {
    let gray = image::load_from_memory(png).expect("png").into_luma8();
    let (mut x_sum, mut y_sum, mut total) = (0.0, 0.0, 0.0);
    for (x, y, pixel) in gray.enumerate_pixels() {
        let ink = f64::from(255 - pixel.0[0]);
        x_sum += f64::from(x) * ink;
        y_sum += f64::from(y) * ink;
        total += ink;
    }
    assert!(total > 0.0, "a blank thumbnail");
    (
        x_sum / total / f64::from(gray.width()),
        y_sum / total / f64::from(gray.height()),
    )
}

/// What `pdftotext` reads in a PDF.
fn pdf_text(pdf: &[u8]) -> String {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("archive.pdf");
    std::fs::write(&path, pdf).expect("write");
    let out = Command::new("pdftotext")
        .arg(&path)
        .arg("-")
        .output()
        .expect("pdftotext (poppler-utils) must be installed: scripts/test installs it");
    assert!(out.status.success(), "pdftotext failed on the archive copy");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn archive(app: &TestApp, token: &str, id: Uuid) -> reqwest::Response {
    app.get_as(token, &format!("/api/documents/{id}/archive"))
        .await
}

async fn refused(response: reqwest::Response) -> (u16, String, String) {
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body: Value = response.json().await.expect("problem json");
    (
        status,
        kind,
        body["code"].as_str().unwrap_or_default().to_owned(),
    )
}

/// The storage key of the archive copy of a document's current version.
async fn archive_key(app: &TestApp, tenant_id: Uuid, document_id: Uuid) -> Option<String> {
    let mut conn = app.pool.get().await.expect("connection");
    let (_, version) = documents::find_document_with_version(&mut conn, tenant_id, document_id)
        .await
        .expect("document")?;
    let version = version?;
    assets::find(&mut conn, tenant_id, version.id, AssetKind::Archive)
        .await
        .expect("asset")
        .map(|asset| asset.storage_key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scans_turned_and_askew_are_read_upright_dated_and_archived_searchably() {
    let app = TestApp::spawn().await;
    let cases: [(u8, &str, bool); 6] = [
        (1, "wombat", false),
        (2, "quokka", false),
        (3, "numbat", false),
        (1, "dugong", true),
        (2, "bilby", true),
        (3, "echidna", true),
    ];
    let mut uploaded = Vec::new();
    for (turns, word, as_pdf) in cases {
        let png = scan(word, turns, 3.0);
        let (bytes, filename) = if as_pdf {
            (fixtures::image_pdf(&[&png]), format!("{word}.pdf"))
        } else {
            (png, format!("{word}.png"))
        };
        let (id, job) = upload(&app, &app.token, bytes, &filename).await;
        uploaded.push((turns, word, as_pdf, id, job));
    }
    let started = std::time::Instant::now();
    app.start_dispatcher();
    let _worker = app.start_worker();
    for (.., job) in &uploaded {
        assert_eq!(analyzed(&app, *job).await.attempts, 1);
    }
    println!("six scans analyzed in {:?}", started.elapsed());

    for (turns, word, as_pdf, id, _) in uploaded {
        let what = format!("{word}: {turns} quarter turns, pdf {as_pdf}");
        let (_, view) = app
            .json_as(
                Method::GET,
                &app.token,
                &format!("/api/documents/{id}"),
                None,
            )
            .await;
        assert_eq!(view["status"], "READY", "{what}: {view}");
        assert_eq!(view["issued_at"], "2023-02-02", "{what}: {view}");
        assert_eq!(search(&app, word).await, [id], "{what}: searching");

        // The page is landscape with its text at the top left: so is an upright thumbnail.
        let thumbnail = app
            .get_as(&app.token, &format!("/api/documents/{id}/thumbnail"))
            .await;
        assert_eq!(thumbnail.status(), 200, "{what}");
        let png = thumbnail.bytes().await.expect("png");
        let (width, height) = fixtures::png_size(&png);
        assert!(width <= 400 && width > height, "{what}: {width}x{height}");
        let (x, y) = ink_centre(&png);
        assert!(x < 0.5 && y < 0.45, "{what}: ink centred at {x:.2}, {y:.2}");

        let response = archive(&app, &app.token, id).await;
        assert_eq!(response.status(), 200, "{what}");
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(header("content-type"), "application/pdf", "{what}");
        assert!(
            header("content-disposition").contains(&format!("{word}.pdf")),
            "{what}"
        );
        let pdf = response.bytes().await.expect("archive");
        assert!(pdf.starts_with(b"%PDF-"), "{what}");
        let text = pdf_text(&pdf);
        for expected in [word, "February 2023", "encyclopedia is overdue"] {
            assert!(text.contains(expected), "{what}: {expected:?} in {text:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_scans_have_an_archive_copy_and_purge_and_tenant_deletion_remove_it() {
    let app = TestApp::spawn().await;
    let (scan_id, scan_job) = upload(&app, &app.token, scan("platypus", 0, 0.0), "a.png").await;
    // Two pages, the second turned: one copy of both, upright.
    let (first, second) = (scan("kangaroo", 0, 0.0), scan("wallaby", 2, 0.0));
    let two_pages = fixtures::image_pdf(&[&first, &second]);
    let (pages_id, pages_job) = upload(&app, &app.token, two_pages, "pages.pdf").await;
    let layered = fixtures::text_pdf(&["Rechnung Nr. 4711", "One quokka plush toy, 19.99 EUR"]);
    let (text_id, text_job) = upload(&app, &app.token, layered, "invoice.pdf").await;
    let (other_tenant, other_token) = app
        .context
        .provisioned_tenant("archivists", Uuid::now_v7())
        .await;
    let (other_id, other_job) = upload(&app, &other_token, scan("koala", 0, 0.0), "b.png").await;
    // Not analyzed yet: no copy.
    assert_eq!(
        refused(archive(&app, &app.token, scan_id).await).await,
        (
            404,
            "application/problem+json".to_owned(),
            "archive_not_available".to_owned()
        )
    );

    app.start_dispatcher();
    let _worker = app.start_worker();
    for job in [scan_job, pages_job, text_job, other_job] {
        analyzed(&app, job).await;
    }
    assert_eq!(archive(&app, &app.token, scan_id).await.status(), 200);
    let response = archive(&app, &app.token, pages_id).await;
    assert_eq!(response.status(), 200);
    let text = pdf_text(&response.bytes().await.expect("archive"));
    let (kangaroo, wallaby) = (text.find("kangaroo"), text.find("wallaby"));
    assert!(
        kangaroo.is_some() && wallaby.is_some() && kangaroo < wallaby,
        "both pages, in order: {text:?}"
    );
    assert_eq!(text.matches('\u{c}').count(), 2, "two pages: {text:?}");
    // A PDF with a text layer is searchable already: no copy.
    assert_eq!(
        refused(archive(&app, &app.token, text_id).await).await.2,
        "archive_not_available"
    );
    // Another tenant's document, or none at all, is simply not found.
    for id in [other_id, Uuid::now_v7()] {
        assert_eq!(
            refused(archive(&app, &app.token, id).await).await,
            (
                404,
                "application/problem+json".to_owned(),
                "not_found".to_owned()
            )
        );
    }

    // Purge: the copy goes with the document.
    let key = archive_key(&app, app.tenant_id, scan_id)
        .await
        .expect("an archive copy");
    assert!(app.context.is_stored(&key).await);
    let path = format!("/api/documents/{scan_id}");
    let (status, _) = app.json_as(Method::DELETE, &app.token, &path, None).await;
    assert_eq!(status, 200, "trashed");
    let (status, body) = app.json_as(Method::DELETE, &app.token, &path, None).await;
    assert_eq!(status, 202, "{body}");
    app.wait_for_job(uuid_at(&body, "/job/id"), JobStatus::Succeeded)
        .await;
    assert!(
        !app.context.is_stored(&key).await,
        "purged with its document"
    );
    assert_eq!(
        refused(archive(&app, &app.token, scan_id).await).await.2,
        "not_found"
    );

    // Tenant deletion: the other tenant's copy goes with the tenant.
    let key = archive_key(&app, other_tenant, other_id)
        .await
        .expect("an archive copy");
    assert!(app.context.is_stored(&key).await);
    let request = sign(
        &app,
        other_tenant,
        "archivists",
        DeletionAction::Reset,
        false,
        Some(TenantStatus::Active),
        OffsetDateTime::now_utc(),
    );
    let (status, body) = submit(&app, other_tenant, &request).await;
    assert_eq!(status, 202, "{body}");
    app.wait_for_job(uuid_at(&body, "/job/id"), JobStatus::Succeeded)
        .await;
    assert!(!app.context.is_stored(&key).await, "wiped with its tenant");
    assert_eq!(archive_key(&app, other_tenant, other_id).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_longer_than_ocr_reads_is_read_in_part_and_gets_no_archive_copy() {
    let app = TestApp::spawn().await;
    let (first, second) = (scan("emu", 0, 0.0), scan("cassowary", 0, 0.0));
    let two_pages = fixtures::image_pdf(&[&first, &second]);
    let (id, job) = upload(&app, &app.token, two_pages, "long.pdf").await;
    app.start_dispatcher();
    let _worker = app.start_worker_with(app.settings_with(|settings| {
        settings.analysis.ocr_max_pages = 1;
    }));
    analyzed(&app, job).await;
    assert_eq!(search(&app, "emu").await, [id], "the page read is found");
    assert!(
        search(&app, "cassowary").await.is_empty(),
        "the page past the limit is not read"
    );
    // A copy of the first page only would pass for the whole document.
    assert_eq!(
        refused(archive(&app, &app.token, id).await).await.2,
        "archive_not_available"
    );
}
