//! Tells operators this worker is alive: every few seconds its row in `workers` (slots,
//! busy slots, analysis slots, queues) and its own slot gauges are refreshed; a clean
//! stop removes the row. Nothing in the job path depends on it, so a failed report is only logged.

use std::sync::Arc;
use std::time::Duration;

use quire_shared::db::workers::{self, WorkerReport};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::context::WorkerContext;

const EVERY: Duration = Duration::from_secs(5);

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_else(|_| "unknown".to_owned())
}

pub async fn run(
    context: Arc<WorkerContext>,
    slots: Arc<Semaphore>,
    total: usize,
    analysis_slots: usize,
    queues: Vec<String>,
    shutdown: CancellationToken,
) {
    let host = host_name();
    let pid = i32::try_from(std::process::id()).unwrap_or(0);
    let total_slots = i32::try_from(total).unwrap_or(i32::MAX);
    let analysis_slots = i32::try_from(analysis_slots.min(total)).unwrap_or(i32::MAX);
    metrics::gauge!(quire_shared::metrics::WORKER_SLOTS).set(total as f64);
    loop {
        let busy = total.saturating_sub(slots.available_permits());
        metrics::gauge!(quire_shared::metrics::WORKER_SLOTS_BUSY).set(busy as f64);
        let report = WorkerReport {
            id: context.worker_id(),
            host: &host,
            pid,
            slots: total_slots,
            busy: i32::try_from(busy).unwrap_or(i32::MAX),
            queues: &queues,
            analysis_slots,
        };
        match context.pool().get().await {
            Ok(mut conn) => {
                if let Err(error) = workers::report(&mut conn, &report).await {
                    tracing::debug!(%error, "could not report this worker as alive");
                }
            }
            Err(error) => tracing::debug!(%error, "could not report this worker as alive"),
        }
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = shutdown.cancelled() => break,
        }
    }
}

/// Removes this worker's row after it stopped.
pub async fn forget(context: &WorkerContext) {
    if let Ok(mut conn) = context.pool().get().await {
        let _ = workers::remove(&mut conn, context.worker_id()).await;
    }
}
