//! Quire's worker: pops messages from Redis only when it has a free slot, claims the job
//! in PostgreSQL, runs it and writes the outcome back fenced by status, worker and
//! attempt (DESIGN §4 steps 3–6).

mod analysis_slots;
mod completer;
mod context;
mod executor;
mod fetcher;
mod heartbeat;
mod presence;

use std::sync::Arc;

use anyhow::{Context, bail};
use quire_shared::config::Settings;
use quire_shared::{broker, redis_client};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub use context::WorkerContext;

/// Runs a worker until `shutdown` is cancelled, then drains in-flight jobs.
pub async fn run(settings: Settings, shutdown: CancellationToken) -> anyhow::Result<()> {
    let context = Arc::new(WorkerContext::new(&settings)?);
    let redis = redis_client::RedisPool::build(&settings.redis)?;
    redis_client::warn_unless_noeviction(&redis).await;
    quire_shared::probe_listener::spawn(
        &settings.worker.probe_listen,
        context.pool().clone(),
        redis,
        Arc::clone(&context.jobs.store),
        quire_shared::probe_listener::Scrape::Process,
        shutdown.clone(),
    )?;
    let served = served_job_types(&settings)?;
    check_tool_sandbox(&settings, &served).await?;
    let keys: Vec<String> = served
        .iter()
        .map(|job_type| broker::queue_key(&settings.redis.namespace, job_type))
        .collect();
    let analyses = analysis_slots::AnalysisSlots::new(
        settings.worker.analysis_concurrency,
        quire_shared::jobs::analysis_slot_types()
            .into_iter()
            .map(|job_type| broker::queue_key(&settings.redis.namespace, job_type)),
    );
    tracing::info!(
        worker_id = %context.worker_id(),
        concurrency = settings.worker.concurrency,
        analysis_concurrency = settings.worker.analysis_concurrency,
        queues = ?served,
        "worker started"
    );
    warn_if_pool_too_small(&settings);
    let slots = Arc::new(Semaphore::new(settings.worker.concurrency));
    let reporting = tokio::spawn(presence::run(
        Arc::clone(&context),
        Arc::clone(&slots),
        settings.worker.concurrency,
        settings.worker.analysis_concurrency,
        served.clone(),
        shutdown.clone(),
    ));
    fetcher::run(
        Arc::clone(&context),
        &settings,
        keys,
        slots,
        analyses,
        shutdown,
    )
    .await;
    let _ = reporting.await;
    presence::forget(&context).await;
    tracing::info!("worker stopped");
    Ok(())
}

/// The job types this worker pops: the configured ones, which must all have a handler,
/// or every type it has a handler for.
fn served_job_types(settings: &Settings) -> anyhow::Result<Vec<String>> {
    if settings.worker.queues.is_empty() {
        return Ok(quire_shared::jobs::job_types().map(str::to_owned).collect());
    }
    for queue in &settings.worker.queues {
        if quire_shared::jobs::find(queue).is_none() {
            bail!("worker.queues names {queue:?}, which this worker has no handler for");
        }
    }
    Ok(settings.worker.queues.clone())
}

/// A worker that runs the analysis tools proves at start-up that their sandbox works
/// here: with `analysis.sandbox = "bwrap"` and no working bubblewrap it refuses to start,
/// never falling back to unconfined tools (docs/decisions.md).
async fn check_tool_sandbox(settings: &Settings, served: &[String]) -> anyhow::Result<()> {
    use quire_shared::config::SandboxMode;
    use quire_shared::jobs::{AnalyzeDocument, BackgroundJob};
    if !served
        .iter()
        .any(|job_type| job_type == AnalyzeDocument::JOB_TYPE)
    {
        return Ok(());
    }
    let mode = settings.analysis.sandbox;
    if mode == SandboxMode::None {
        tracing::warn!("analysis.sandbox is \"none\": tools run without a sandbox");
    }
    quire_shared::analysis::tools::check_sandbox(mode)
        .await
        .with_context(|| {
            format!(
                "the analysis tools' sandbox ({mode:?}) does not work on this machine: \
                 install bubblewrap and allow user namespaces, or set \
                 analysis.sandbox = \"none\" (refused in production)"
            )
        })
}

/// Each running job may hold a connection, and the batch claim and the completer need
/// their own: with fewer, jobs wait for a connection and their latency grows with load.
fn warn_if_pool_too_small(settings: &Settings) {
    let wanted = settings.worker.concurrency + 2;
    if settings.worker_pool_size() < wanted {
        tracing::warn!(
            pool_size = settings.worker_pool_size(),
            concurrency = settings.worker.concurrency,
            wanted,
            "database.pool_size is below worker.concurrency + 2: jobs will wait for connections"
        );
    }
}
