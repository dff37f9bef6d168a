//! A worker runs at most `worker.analysis_concurrency` analyses and pops one only while
//! one of those slots is free: with its analysis slot taken it leaves the next analysis
//! in Redis for another worker, and its other slots keep running other jobs. Each run is
//! held at a fault point, not timed.

use quire_shared::db::jobs::{self, NewJob};
use quire_shared::fault_points::{self, Held, Point};
use quire_shared::jobs::{AnalyzeDocument, BackgroundJob, BenchNoop};
use quire_shared::states::JobStatus;
use uuid::Uuid;

use crate::helpers::{DEADLINE, TestApp};

/// A no-op job of the test's tenant, published by the dispatcher as any job is.
async fn enqueue_noop(app: &TestApp) -> Uuid {
    let job = NewJob::new(
        app.tenant_id,
        BenchNoop {},
        app.context.settings.jobs.max_attempts,
        None,
    );
    let mut conn = app.pool.get().await.expect("connection");
    jobs::enqueue_many(&mut conn, &[job])
        .await
        .expect("enqueue")
        .remove(0)
        .expect("a no-op job never conflicts")
        .job_id
}

/// Waits until one of two held analyses is reached: answers the one running and the
/// other, each as (job id, its hold).
async fn first_reached(
    mut first: (Uuid, Held),
    mut second: (Uuid, Held),
) -> ((Uuid, Held), (Uuid, Held)) {
    let first_ran = tokio::time::timeout(DEADLINE, async {
        tokio::select! {
            _ = first.1.reached() => true,
            _ = second.1.reached() => false,
        }
    })
    .await
    .expect("an analysis reaches its hold");
    if first_ran {
        (first, second)
    } else {
        (second, first)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_analysis_slot_is_taken_leaves_the_next_analysis_queued() {
    let app = TestApp::spawn().await;
    app.start_dispatcher();
    let (first_document, first_job) = app.upload(b"a letter written on 2024-03-04").await;
    let (second_document, second_job) = app.upload(b"a letter written on 2024-05-06").await;
    let first = (
        first_job,
        fault_points::hold(Point::AnalysisBeforeStore, first_document),
    );
    let second = (
        second_job,
        fault_points::hold(Point::AnalysisBeforeStore, second_document),
    );
    // Both analyses wait in Redis before the worker's first pop, which could take both.
    app.context
        .wait_for_queue_length(AnalyzeDocument::JOB_TYPE, 2)
        .await;

    let _worker = app.start_worker_with(app.settings_with(|settings| {
        settings.worker.concurrency = 4;
        settings.worker.analysis_concurrency = 1;
        // Far beyond the test's deadline: the freed analysis slot below must not wait
        // for a pop of the other lists to time out.
        settings.worker.pop_timeout_seconds = 3600;
    }));
    let ((running_job, running), (waiting_job, waiting)) = first_reached(first, second).await;

    // The worker's three other slots still pop and run what is not an analysis; its
    // pops came after the second analysis was in Redis.
    let noop = enqueue_noop(&app).await;
    app.wait_for_job(noop, JobStatus::Succeeded).await;
    assert_eq!(
        app.job(waiting_job).await.status,
        JobStatus::Queued,
        "the analysis beyond the worker's analysis slots was claimed"
    );
    app.context
        .wait_for_queue_length(AnalyzeDocument::JOB_TYPE, 1)
        .await;

    // The slot freed, the second analysis runs in it, without waiting for the pop of
    // the other lists that was under way to time out.
    running.release();
    app.wait_for_job(running_job, JobStatus::Succeeded).await;
    waiting.release();
    app.wait_for_job(waiting_job, JobStatus::Succeeded).await;
}
