//! Runs one popped message: parse, claim, run the handler, write the outcome back fenced.

use std::sync::Arc;

use diesel_async::AsyncConnection;
use quire_shared::broker::{MESSAGE_VERSION, WireMessage};
use quire_shared::db::jobs::{self, Fence, Job};
use quire_shared::db::{DbError, documents};
use tracing::Instrument;

use crate::context::WorkerContext;
use crate::outcome::JobError;

/// Handles one raw message. Never panics on bad input: a malformed message is logged and
/// dropped (the outbox's lost-message recovery re-announces any real job).
pub async fn handle(context: &Arc<WorkerContext>, raw: &str) {
    let message = match serde_json::from_str::<WireMessage>(raw) {
        Ok(message) if message.v == MESSAGE_VERSION => message,
        Ok(message) => {
            tracing::warn!(
                version = message.v,
                "dropping a message of an unknown version"
            );
            return;
        }
        Err(error) => {
            tracing::warn!(%error, bytes = raw.len(), "dropping a malformed message");
            return;
        }
    };
    let span = tracing::info_span!(
        "job",
        job_id = %message.job_id,
        job_type = %message.job_type,
        tenant_id = %message.tenant_id,
        worker_id = %context.worker_id,
        task_id = %message.task_id,
    );
    if let Err(error) = process(context, &message).instrument(span.clone()).await {
        span.in_scope(|| tracing::error!(error = format!("{error:#}"), "job processing failed"));
    }
}

async fn process(context: &WorkerContext, message: &WireMessage) -> anyhow::Result<()> {
    let claimed = {
        let mut conn = context.pool.get().await?;
        jobs::claim_job(
            &mut conn,
            message.job_id,
            message.event_id,
            &context.worker_id,
            message.task_id,
            context.lease,
        )
        .await?
    };
    let Some(job) = claimed else {
        // Running elsewhere, finished, cancelled, or an older event's copy: nothing to do.
        tracing::debug!("message claims nothing: duplicate, stale or finished");
        return Ok(());
    };
    let fence = job
        .fence()
        .ok_or_else(|| anyhow::anyhow!("a claimed job has no worker id"))?;
    tracing::info!(attempt = job.attempts, "job claimed");
    let outcome = run_handler(context, &job).await;
    finish(context, &job, &fence, outcome).await
}

async fn run_handler(context: &WorkerContext, job: &Job) -> Result<(), JobError> {
    let Some(handler) = context.handlers.get(&job.job_type) else {
        return Err(JobError::permanent(
            "unsupported_job_type",
            "no worker can run this job type",
        ));
    };
    match tokio::time::timeout(handler.time_limit(), handler.run(context, job)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(JobError::Transient {
            code: "timed_out",
            message: "the job ran past its time limit",
            cause: None,
        }),
    }
}

/// Writes the outcome, fenced: a stale worker's write changes nothing and is logged.
async fn finish(
    context: &WorkerContext,
    job: &Job,
    fence: &Fence,
    outcome: Result<(), JobError>,
) -> anyhow::Result<()> {
    let mut conn = context.pool.get().await?;
    let applied = match &outcome {
        Ok(()) => jobs::mark_succeeded(&mut conn, fence).await?,
        Err(JobError::Transient {
            code,
            message,
            cause,
        }) if job.attempts < job.max_attempts => {
            let delay = context.retry_backoff.delay(job.attempts.max(1) as u32);
            tracing::warn!(
                code,
                cause = cause.as_ref().map(|cause| format!("{cause:#}")),
                retry_in_ms = delay.as_millis() as u64,
                "job failed transiently, retrying"
            );
            jobs::requeue_for_retry(&mut conn, fence, delay, code, message).await?
        }
        Err(error) => {
            let fail_document = match error {
                JobError::Permanent { fail_document, .. } => *fail_document,
                // Out of attempts: the document cannot become ready this way.
                JobError::Transient { .. } => true,
            };
            tracing::warn!(code = error.code(), "job failed");
            fail(&mut conn, job, fence, error, fail_document).await?
        }
    };
    if applied {
        if outcome.is_ok() {
            tracing::info!("job succeeded");
        }
    } else {
        tracing::warn!(job_id = %fence.job_id, attempt = fence.attempt, "stale write-back ignored: the job moved on without this worker");
    }
    Ok(())
}

/// `RUNNING → FAILED` and, when asked, the document `FAILED` — in one transaction, so the
/// document never fails for a job whose fence no longer holds.
async fn fail(
    conn: &mut diesel_async::AsyncPgConnection,
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
        if let (true, Some(document_id)) = (fail_document, job.document_id) {
            documents::mark_document_failed(conn, job.tenant_id, document_id, message).await?;
        }
        Ok(true)
    })
    .await
}
