//! One image costs the worker at most its memory budget (`analysis.image_memory_budget_mb`):
//! a PNG of a few hundred kilobytes that declares 20000 × 20000 grey pixels (400 MB
//! decoded) runs through a real worker process, whose peak resident memory (the kernel's
//! VmHWM) is measured when the job has ended.

use std::time::Duration;

use quire_shared::states::JobStatus;
use quire_shared::test_support::eventually;
use serde_json::Value;

use crate::fixtures;
use crate::helpers::{TestApp, uuid_at};

const MIB: u64 = 1024 * 1024;
/// The default budget (config/default.toml).
const BUDGET_MB: u64 = 256;
/// What a worker holds besides one image: its runtime, pools, buffers, the upload-sized
/// copy of a file. Measured at about 40 MB; the margin is for allocator slack.
const BASELINE_MB: u64 = 128;

/// The peak resident set of process `pid`, in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kilobytes: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kilobytes * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_png_declaring_20000_by_20000_grey_pixels_stays_within_the_image_budget() {
    // Decoding and reading this page loads both cores for a minute or more: one heavy
    // test at a time. Beside it, the contract run's requests outlasted Schemathesis's
    // response time limit (a 13 s upload, ST112).
    let _serial = crate::faults::one_at_a_time().await;
    let app = TestApp::spawn().await;
    let png = fixtures::black_png(20_000, 20_000);
    assert!(png.len() < 1024 * 1024, "{} bytes", png.len());
    let response = app.upload_as(&app.token, png, "huge.png").await;
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.expect("json");
    let job_id = uuid_at(&body, "/job/id");
    let document = uuid_at(&body, "/document/id");

    let logs = tempfile::tempdir().expect("log folder");
    // The default tool limits (60 s): the reduced page, still 10000 pixels a side, is
    // scaled to the reading size (`analysis.ocr_max_megapixels`) before orientation
    // detection and OCR. Read at 100 million pixels, tesseract once ran past the limit
    // on the loaded CI cores (analysis_limit_exceeded), and minutes on a quiet one.
    let worker = app.spawn_worker_process(&[], &logs.path().join("worker.log"));
    let pid = worker.id().expect("running");
    app.start_dispatcher();
    let started = std::time::Instant::now();
    let job = eventually(Duration::from_secs(240), "the job has ended", || async {
        let job = app.job(job_id).await;
        matches!(job.status, JobStatus::Succeeded | JobStatus::Failed).then_some(job)
    })
    .await;
    let peak = peak_rss(pid);
    println!(
        "worker peak rss: {} MiB; job {:?} {:?} after {:?}",
        peak / MIB,
        job.status,
        job.error_code,
        started.elapsed()
    );
    assert!(
        peak < (BUDGET_MB + BASELINE_MB) * MIB,
        "the worker peaked at {} MiB for one image (budget {BUDGET_MB} MiB)",
        peak / MIB
    );
    // Past the budget at full size, the image is decoded reduced: a thumbnail and OCR
    // of the reduced image, in one attempt.
    assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error_code);
    assert_eq!(job.attempts, 1);
    let thumbnail = app
        .get_as(&app.token, &format!("/api/documents/{document}/thumbnail"))
        .await;
    assert_eq!(thumbnail.status(), 200);
    let (width, height) = fixtures::png_size(&thumbnail.bytes().await.expect("png"));
    assert_eq!((width, height), (400, 400));
}
