//! The consume loop: pop only as many messages as there are free slots (no prefetch),
//! claim them in one statement, hand each claimed job to a task,
//! reconnect with backoff, and on shutdown stop popping and drain in-flight jobs.
//! Each pop starts at the next of the worker's lists in turn: a pop takes from the
//! first list that has messages, so with a fixed order a queue whose list never runs dry
//! (the dispatcher keeps refilling it) starved every list after it.

use std::sync::Arc;
use std::time::Duration;

use quire_shared::broker;
use quire_shared::config::Settings;
use quire_shared::redis_client::{self, BlockingConnection};
use quire_shared::retry::ReconnectBackoff;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::analysis_slots::AnalysisSlots;
use crate::context::WorkerContext;
use crate::executor::{self, Delivery};

/// A pop that outlives its own server-side timeout by this much is a dead connection.
const POP_GUARD: Duration = Duration::from_secs(5);

/// How long a pop waits while every analysis slot is taken (and so leaves the analysis
/// lists out): a freed slot waits at most this long for the next analysis, for ten pops
/// a second of an otherwise idle worker whose analyses fill their slots.
const ANALYSIS_RECHECK: Duration = Duration::from_millis(100);

pub async fn run(
    context: Arc<WorkerContext>,
    settings: &Settings,
    mut keys: Vec<String>,
    slots: Arc<Semaphore>,
    analyses: AnalysisSlots,
    shutdown: CancellationToken,
) {
    let pop_timeout = Duration::from_secs(settings.worker.pop_timeout_seconds.max(1));
    let mut tasks = JoinSet::new();
    // Cancelled at the drain deadline: running jobs stop and are queued again at once.
    let hard_stop = CancellationToken::new();
    let mut connection: Option<BlockingConnection> = None;
    let mut delays = ReconnectBackoff::new();

    while !shutdown.is_cancelled() {
        while tasks.try_join_next().is_some() {}
        let permit = tokio::select! {
            permit = Arc::clone(&slots).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            _ = shutdown.cancelled() => break,
        };
        let mut conn = match &connection {
            Some(conn) => conn.clone(),
            None => match redis_client::blocking_connection(&settings.redis).await {
                Ok(conn) => {
                    tracing::info!("connected to redis");
                    delays.reset();
                    connection = Some(conn.clone());
                    conn
                }
                Err(error) => {
                    pause(&mut delays, &shutdown, &error).await;
                    continue;
                }
            },
        };
        // As many messages as there are free slots (and analysis slots, when the pop may
        // take analyses): one pop and one claim for the batch. Only this loop takes
        // permits, so the ones counted here are still free after the pop.
        let Some(plan) = analyses.plan(&keys, 1 + slots.available_permits()) else {
            // Every list of this worker needs an analysis slot, and none is free.
            tokio::select! {
                _ = analyses.freed() => continue,
                _ = shutdown.cancelled() => break,
            }
        };
        // Not raced against shutdown: dropping a pop Redis already answered would lose
        // the messages. Shutdown waits at most one pop timeout. Nor against a freed
        // analysis slot, for the same reason: a pop without the analysis lists waits
        // only briefly instead, so that the next analysis starts soon after a slot frees.
        let wait = if plan.without_analyses {
            ANALYSIS_RECHECK.min(pop_timeout)
        } else {
            pop_timeout
        };
        let popped = tokio::time::timeout(
            wait + POP_GUARD,
            broker::pop(&mut conn, &plan.lists, wait, plan.count),
        )
        .await;
        drop(plan);
        // The next pop looks at the next list first: every queue with messages gets a
        // turn at the head, whatever the others hold.
        keys.rotate_left(1);
        match popped {
            Ok(Ok(Some((list, raws)))) => {
                let mut permits = vec![permit];
                while permits.len() < raws.len() {
                    match Arc::clone(&slots).try_acquire_owned() {
                        Ok(permit) => permits.push(permit),
                        Err(_) => break,
                    }
                }
                let analysis_slots = analyses.take(&list, raws.len());
                let deliveries: Vec<Delivery> = raws
                    .into_iter()
                    .zip(permits)
                    .zip(analysis_slots)
                    .map(|((raw, permit), analysis)| Delivery {
                        raw,
                        permit,
                        analysis,
                    })
                    .collect();
                // The claim runs beside the next pop: the loop goes back to Redis as
                // soon as a slot is free, not when this batch's claim has committed.
                let context = Arc::clone(&context);
                let hard_stop = hard_stop.clone();
                tasks.spawn(async move {
                    let mut jobs = JoinSet::new();
                    for claimed in executor::claim(&context, deliveries).await {
                        let context = Arc::clone(&context);
                        let hard_stop = hard_stop.clone();
                        jobs.spawn(async move {
                            executor::run(&context, claimed, &hard_stop).await;
                        });
                    }
                    // Dropping this task (at the drain deadline) aborts its jobs too.
                    while jobs.join_next().await.is_some() {}
                });
            }
            Ok(Ok(None)) => {}
            Ok(Err(error)) => {
                connection = None;
                pause(&mut delays, &shutdown, &error).await;
            }
            Err(_) => {
                connection = None;
                tracing::warn!("a blocking pop hung past its timeout, reconnecting");
            }
        }
    }
    drain(
        tasks,
        Duration::from_secs(settings.worker.drain_timeout_seconds),
        hard_stop,
    )
    .await;
}

async fn pause(
    delays: &mut ReconnectBackoff,
    shutdown: &CancellationToken,
    error: &(dyn std::fmt::Display + Sync),
) {
    let delay = delays.next_delay();
    tracing::warn!(%error, retry_in_ms = delay.as_millis() as u64, "redis unavailable");
    tokio::select! {
        _ = shutdown.cancelled() => {}
        _ = tokio::time::sleep(delay) => {}
    }
}

/// Lets in-flight jobs finish until the deadline, then stops the rest, which queue
/// themselves again at once (nobody waits for their leases to expire).
async fn drain(mut tasks: JoinSet<()>, deadline: Duration, hard_stop: CancellationToken) {
    if tasks.is_empty() {
        return;
    }
    tracing::info!(batches = tasks.len(), "draining in-flight jobs");
    if join_all(&mut tasks, deadline).await {
        return;
    }
    tracing::warn!(
        batches = tasks.len(),
        "drain deadline passed, stopping running jobs and queueing them again"
    );
    hard_stop.cancel();
    if !join_all(&mut tasks, Duration::from_secs(10)).await {
        tracing::warn!(
            batches = tasks.len(),
            "jobs did not stop, leaving them to their leases"
        );
        tasks.abort_all();
    }
}

/// True when every task ended within `deadline`.
async fn join_all(tasks: &mut JoinSet<()>, deadline: Duration) -> bool {
    tokio::time::timeout(deadline, async {
        while tasks.join_next().await.is_some() {}
    })
    .await
    .is_ok()
}
