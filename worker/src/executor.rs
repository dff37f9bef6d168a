//! Runs popped messages: parse, claim a batch in one statement, run each handler beside
//! its heartbeat, write each outcome back fenced.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use diesel_async::{AsyncConnection, AsyncPgConnection};
use futures_util::FutureExt;
use quire_shared::broker::{MESSAGE_VERSION, WireMessage};
use quire_shared::db::jobs::{self, ClaimRequest, ClaimedJob, Fence, Job, Stopped};
use quire_shared::db::{DbError, documents};
use quire_shared::events;
use quire_shared::fault_points::{self, Point};
use quire_shared::jobs::{self as job_types, JobContext, JobError, Prepared, RetryClass};
use quire_shared::retry::Backoff;
use quire_shared::states::TenantStatus;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::context::WorkerContext;
use crate::heartbeat;

/// How a run ended.
enum Ended {
    Finished(Result<(), JobError>),
    /// The heartbeat found the job cancelled or taken over: no write-back.
    Lost,
    /// The worker is shutting down past its drain deadline.
    Stopped,
}

/// One message popped from Redis, with the slot it will run in (and its analysis slot,
/// when its type needs one).
pub struct Delivery {
    pub raw: String,
    pub permit: OwnedSemaphorePermit,
    pub analysis: Option<OwnedSemaphorePermit>,
}

/// A job this worker claimed, ready to run in its slot.
pub struct Claimed {
    message: WireMessage,
    claimed: ClaimedJob,
    permit: OwnedSemaphorePermit,
    analysis: Option<OwnedSemaphorePermit>,
}

/// Parses a batch of popped messages and claims their jobs in one guarded statement.
/// Never panics on bad input: a malformed message is logged and dropped, and so is a
/// batch whose claim fails (lost-message recovery re-announces any real job). A message
/// that claims nothing — its job runs elsewhere, finished, was cancelled, or it carries
/// an older event — is counted as a duplicate and its slot freed.
pub async fn claim(context: &WorkerContext, deliveries: Vec<Delivery>) -> Vec<Claimed> {
    let mut pending: Vec<(WireMessage, Delivery)> = deliveries
        .into_iter()
        .filter_map(|delivery| parse(&delivery.raw).map(|message| (message, delivery)))
        .collect();
    if pending.is_empty() {
        return Vec::new();
    }
    let requests: Vec<ClaimRequest> = pending
        .iter()
        .map(|(message, _)| ClaimRequest {
            job_id: message.job_id,
            event_id: message.event_id,
            task_id: message.task_id,
        })
        .collect();
    metrics::histogram!(quire_shared::metrics::CLAIM_BATCH_SIZE).record(requests.len() as f64);
    let claimed = async {
        let mut conn = context.pool().get().await?;
        jobs::claim_jobs(&mut conn, &requests, context.worker_id(), context.lease).await
    }
    .await;
    let claimed = match claimed {
        Ok(claimed) => claimed,
        Err(error) => {
            let job_ids: Vec<String> = requests.iter().map(|r| r.job_id.to_string()).collect();
            tracing::error!(%error, job_ids = ?job_ids, "claiming popped jobs failed, leaving them to recovery");
            return Vec::new();
        }
    };
    let mut ready = Vec::with_capacity(claimed.len());
    for claimed in claimed {
        // The message whose task the claim recorded (two copies of one message: the first).
        let Some(position) = pending.iter().position(|(message, _)| {
            message.job_id == claimed.job.id && Some(message.task_id) == claimed.job.last_task_id
        }) else {
            continue;
        };
        let (message, delivery) = pending.swap_remove(position);
        ready.push(Claimed {
            message,
            claimed,
            permit: delivery.permit,
            analysis: delivery.analysis,
        });
    }
    for (message, _) in &pending {
        tracing::debug!(
            job_id = %message.job_id,
            task_id = %message.task_id,
            "message claims nothing: duplicate, stale, finished or held by a pause"
        );
    }
    if !pending.is_empty() {
        metrics::counter!(quire_shared::metrics::DUPLICATES_SKIPPED)
            .increment(pending.len() as u64);
    }
    ready
}

fn parse(raw: &str) -> Option<WireMessage> {
    match serde_json::from_str::<WireMessage>(raw) {
        Ok(message) if message.v == MESSAGE_VERSION => Some(message),
        Ok(message) => {
            tracing::warn!(
                version = message.v,
                "dropping a message of an unknown version"
            );
            None
        }
        Err(error) => {
            tracing::warn!(%error, bytes = raw.len(), "dropping a malformed message");
            None
        }
    }
}

/// Runs one claimed job in its slot. `stop` cancels it at the drain deadline; it is
/// queued again at once, or fails if that was its last attempt.
pub async fn run(context: &Arc<WorkerContext>, claimed: Claimed, stop: &CancellationToken) {
    let Claimed {
        message,
        claimed,
        permit,
        analysis,
    } = claimed;
    let span = tracing::info_span!(
        "job",
        job_id = %message.job_id,
        job_type = %message.job_type,
        tenant_id = %message.tenant_id,
        worker_id = %context.worker_id(),
        task_id = %message.task_id,
        request_id = message.request_id.as_deref().unwrap_or_default(),
    );
    // The slot is freed when the job ends, or once its finish is handed to the completer.
    if let Err(error) = process(context, claimed, stop, permit, analysis)
        .instrument(span.clone())
        .await
    {
        span.in_scope(|| tracing::error!(error = format!("{error:#}"), "job processing failed"));
    }
}

async fn process(
    context: &Arc<WorkerContext>,
    claimed: ClaimedJob,
    stop: &CancellationToken,
    slot: OwnedSemaphorePermit,
    analysis: Option<OwnedSemaphorePermit>,
) -> anyhow::Result<()> {
    let tenant_status = claimed.tenant_status;
    let job = claimed.job;
    // The handler's view: the process's context and the version the claim read.
    let run_context = context.jobs.for_run(claimed.version);
    let job_type = job.job_type.clone();
    metrics::counter!(quire_shared::metrics::JOBS_CLAIMED, "type" => job_type.clone()).increment(1);
    if let Some(started_at) = job.started_at {
        // Both instants come from the database clock.
        let wait = (started_at - job.queued_at).as_seconds_f64().max(0.0);
        metrics::histogram!(quire_shared::metrics::JOB_QUEUE_WAIT_SECONDS, "type" => job_type.clone())
            .record(wait);
    }
    let started = std::time::Instant::now();
    let fence = job
        .fence()
        .ok_or_else(|| anyhow::anyhow!("a claimed job has no worker id"))?;
    tracing::info!(attempt = job.attempts, "job claimed");
    let lost = CancellationToken::new();
    // Polled beside the handler in this task, not spawned: a task of its own per job
    // woke a second runtime thread on the job's path (docs/benchmarks.md, the
    // nineteenth comparison). It ends with the `select!` below, before any write-back
    // (a beat after it would find the job moved on), and never outlives the job: on
    // every path out of here it is dropped with this function's future.
    let beating = heartbeat::run(Arc::clone(context), fence.clone(), lost.clone());
    let (handler, ended) = match prepare(&job, tenant_status) {
        Err(refused) => (None, Ended::Finished(Err(refused))),
        Ok(handler) => {
            let ended = tokio::select! {
                // A handler that found its fence gone before a write ends as the
                // heartbeat's finding would: no write-back.
                outcome = run_handler(&run_context, &handler, &job, &lost) => match outcome {
                    Err(JobError::FenceLost) => Ended::Lost,
                    outcome => Ended::Finished(outcome),
                },
                // The heartbeat returns only once it found the fence gone (it cancels
                // `lost`, the handler's token, as it returns: the only one that does).
                _ = beating => Ended::Lost,
                _ = stop.cancelled() => Ended::Stopped,
            };
            (Some(handler), ended)
        }
    };
    // The run's images and tools are gone: the next analysis may start while this one
    // writes its outcome back.
    drop(analysis);
    // A retry waits as the type's retry class says (webhook deliveries have their own).
    let backoff = handler.as_ref().map_or(context.retry_backoff, |handler| {
        context.backoff_for(handler.retry)
    });
    let handler = handler.as_ref().map(|handler| handler.prepared.as_ref());
    metrics::histogram!(quire_shared::metrics::JOB_RUN_SECONDS, "type" => job_type)
        .record(started.elapsed().as_secs_f64());

    match ended {
        Ended::Finished(outcome) => {
            finish(context, handler, &job, &fence, backoff, outcome, slot).await
        }
        Ended::Lost => {
            tracing::info!("job stopped without side effects: it was cancelled or taken over");
            Ok(())
        }
        Ended::Stopped => {
            let mut conn = context.pool().get().await?;
            let stopped = stop_at_shutdown(&mut conn, &job, &fence).await?;
            match stopped {
                Stopped::Requeued => tracing::warn!("job stopped by shutdown and queued again"),
                Stopped::Failed { .. } => {
                    metrics::counter!(
                        quire_shared::metrics::JOBS_FINISHED,
                        "type" => job.job_type.clone(),
                        "outcome" => "failed"
                    )
                    .increment(1);
                    tracing::warn!(
                        attempt = job.attempts,
                        "job stopped by shutdown on its last attempt, failed"
                    );
                }
                Stopped::Stale => stale(&fence),
            }
            Ok(())
        }
    }
}

/// A claimed job's handler: its type's, with the payload parsed once.
struct Handler {
    prepared: Box<dyn Prepared>,
    time_limit: Duration,
    retry: RetryClass,
    /// A failure of the job is its document's failure (`OWNS_DOCUMENT_STATUS`).
    owns_document_status: bool,
}

/// The handler of the job row's type (the truth, not the message), once the type's
/// tenant guard passed and the payload parsed; a safe permanent error otherwise.
fn prepare(job: &Job, tenant_status: Option<TenantStatus>) -> Result<Handler, JobError> {
    let Some(job_type) = job_types::find(&job.job_type) else {
        if job_types::RETIRED_JOB_TYPES.contains(&job.job_type.as_str()) {
            return Err(JobError::permanent(
                "retired_job_type",
                "this job type is retired; its work runs inside the analysis",
            ));
        }
        return Err(JobError::permanent(
            "unsupported_job_type",
            "no worker can run this job type",
        ));
    };
    job_type.check_tenant(tenant_status)?;
    let spec = job_type.spec();
    Ok(Handler {
        prepared: job_type.prepare(job)?,
        time_limit: Duration::from_secs(spec.time_limit_seconds),
        retry: spec.retry,
        owns_document_status: spec.owns_document_status,
    })
}

async fn run_handler(
    context: &JobContext,
    handler: &Handler,
    job: &Job,
    cancelled: &CancellationToken,
) -> Result<(), JobError> {
    // A panic in the handler (or in a blocking step it resumes, see
    // `analysis::blocking`) ends here as a failure of this attempt instead of unwinding
    // the slot's task. Unwind safety: the handler shares nothing with the worker that a
    // half-done run could leave inconsistent; its writes are fenced transactions.
    let run = AssertUnwindSafe(handler.prepared.run(context, job, cancelled)).catch_unwind();
    match tokio::time::timeout(handler.time_limit, run).await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(panic)) => {
            let panic = panic
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(panic, "job handler panicked");
            // Permanent: a panic is a bug, and the same input hits it again
            // (docs/decisions.md, "A panicking attempt").
            Err(JobError::Permanent {
                code: "handler_panicked",
                message: "the job stopped on an internal error",
                fail_document: handler.owns_document_status,
            })
        }
        Err(_) => Err(JobError::Transient {
            code: "timed_out",
            message: "the job ran past its time limit",
            cause: None,
        }),
    }
}

fn stale(fence: &Fence) {
    tracing::warn!(
        job_id = %fence.job_id,
        attempt = fence.attempt,
        "stale write-back ignored: the job moved on without this worker"
    );
}

/// Writes the outcome, fenced: a stale worker's write changes nothing and is logged.
async fn finish(
    context: &WorkerContext,
    handler: Option<&dyn Prepared>,
    job: &Job,
    fence: &Fence,
    backoff: Backoff,
    outcome: Result<(), JobError>,
    slot: OwnedSemaphorePermit,
) -> anyhow::Result<()> {
    let applied = match &outcome {
        Ok(()) => succeed(context, handler, job, fence, slot).await?,
        Err(JobError::Transient {
            code,
            message,
            cause,
        }) if job.attempts < job.max_attempts => {
            let delay = backoff.delay(job.attempts.max(1).unsigned_abs());
            tracing::warn!(
                code,
                cause = cause.as_ref().map(|cause| format!("{cause:#}")),
                retry_in_ms = delay.as_millis() as u64,
                "job failed transiently, retrying"
            );
            let mut conn = context.pool().get().await?;
            jobs::requeue_for_retry(&mut conn, fence, delay, code, message).await?
        }
        Err(error) => {
            let fail_document = match error {
                JobError::Permanent { fail_document, .. } => *fail_document,
                // Out of attempts: the document cannot become ready this way.
                JobError::Transient { .. } => true,
                // Ended as `Ended::Lost` before any write-back; never written as a failure.
                JobError::FenceLost => false,
            };
            tracing::warn!(code = error.code(), "job failed");
            let mut conn = context.pool().get().await?;
            fail(&mut conn, job, fence, error, fail_document).await?
        }
    };
    let counted = match &outcome {
        Ok(()) => "succeeded",
        Err(JobError::Transient { .. }) if job.attempts < job.max_attempts => "retried",
        Err(_) => "failed",
    };
    if applied {
        metrics::counter!(
            quire_shared::metrics::JOBS_FINISHED,
            "type" => job.job_type.clone(),
            "outcome" => counted
        )
        .increment(1);
    }
    match (applied, outcome.is_ok()) {
        (true, true) => tracing::info!("job succeeded"),
        (true, false) => {}
        (false, _) => stale(fence),
    }
    Ok(())
}

/// `RUNNING → SUCCEEDED` and the handler's own completion writes, in one transaction:
/// an effect never commits for a job whose fence no longer holds. A handler without such
/// writes hands its fenced finish to the completer, which writes it in a batch, and frees
/// its slot as soon as the completer took it (`completer`'s module comment); a handler
/// with them keeps its slot, and so its connection, until its transaction ends.
async fn succeed(
    context: &WorkerContext,
    handler: Option<&dyn Prepared>,
    job: &Job,
    fence: &Fence,
    slot: OwnedSemaphorePermit,
) -> anyhow::Result<bool> {
    let Some(handler) = handler.filter(|handler| handler.writes_on_success()) else {
        let finishing = context.completer.submit(fence.clone()).await?;
        drop(slot);
        return finishing.written().await;
    };
    let mut conn = context.pool().get().await?;
    let applied = conn
        .transaction::<_, DbError, _>(async |conn| {
            if !jobs::mark_succeeded(conn, fence).await? {
                return Ok(false);
            }
            pass_finish_point(job).await;
            handler.commit_success(&context.jobs, conn, job).await?;
            Ok(true)
        })
        .await?;
    Ok(applied)
}

/// `RUNNING → FAILED` and, when asked, the version and (while it is current) the document
/// `FAILED` — in one transaction, so neither fails for a job whose fence no longer holds.
/// The failures are announced (`job.failed`, and `document.failed` when the document
/// itself failed) in the same transaction.
async fn fail(
    conn: &mut AsyncPgConnection,
    job: &Job,
    fence: &Fence,
    error: &JobError,
    fail_document: bool,
) -> Result<bool, DbError> {
    let (code, message) = (error.code(), error.safe_message());
    conn.transaction::<_, DbError, _>(async |conn| {
        if !jobs::mark_failed(conn, fence, code, message).await? {
            return Ok(false);
        }
        pass_finish_point(job).await;
        let document = job.document_id.filter(|_| fail_document);
        if let Some(document_id) = document {
            // The document before its version (the failure writes both): the lock order.
            documents::lock_document(conn, job.tenant_id, document_id).await?;
        }
        // True only when the document itself moved: a newer version's failed analysis
        // leaves the current version, and the document, as they were.
        let document_failed = match document {
            Some(_) => documents::mark_failed_for_job(conn, job.id, message).await?,
            None => false,
        };
        announce_failure(conn, job, code, document.filter(|_| document_failed)).await?;
        Ok(true)
    })
    .await
}

/// Where a fault test holds a finishing transaction (a no-op in a normal build).
async fn pass_finish_point(job: &Job) {
    if let Some(document_id) = job.document_id {
        fault_points::pass(Point::FinishBeforeDocument, document_id).await;
    }
}

/// `job.failed`, and `document.failed` for the document it failed, if any: call in the
/// transaction that wrote the failure.
async fn announce_failure(
    conn: &mut AsyncPgConnection,
    job: &Job,
    code: &str,
    failed_document: Option<uuid::Uuid>,
) -> Result<(), DbError> {
    events::job_failed(
        conn,
        job.tenant_id,
        job.id,
        &job.job_type,
        job.document_id,
        code,
    )
    .await?;
    if let Some(document_id) = failed_document {
        events::document_failed(conn, job.tenant_id, document_id, job.id, code).await?;
    }
    Ok(())
}

/// The drain deadline's fenced end of a run (`jobs::stop_at_shutdown`), with the
/// failure announced in the same transaction when it was the job's last attempt.
async fn stop_at_shutdown(
    conn: &mut AsyncPgConnection,
    job: &Job,
    fence: &Fence,
) -> Result<Stopped, DbError> {
    const CODE: &str = "worker_shutdown";
    conn.transaction::<_, DbError, _>(async |conn| {
        let stopped = jobs::stop_at_shutdown(
            conn,
            fence,
            CODE,
            "the worker shut down before the job finished",
        )
        .await?;
        if let Stopped::Failed { document_failed } = stopped {
            // The statement failed the document too when the job owns its status and
            // names its current version (`failed_analysis_ctes!`).
            announce_failure(conn, job, CODE, job.document_id.filter(|_| document_failed)).await?;
        }
        Ok(stopped)
    })
    .await
}
