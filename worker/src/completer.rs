//! Coalesces the fenced `RUNNING → SUCCEEDED` writes of jobs without completion writes
//! of their own: the finishes that arrive while one batch is being written go out
//! together in the next statement, one commit and one WAL flush for all of them. Nothing
//! waits when the worker is idle: a lone finish is written at once.
//!
//! A job hands its finish over and frees its slot before the write commits (River's
//! batch completer does the same): a slot is for running a handler, and the next job can
//! be popped and claimed while the finish waits for its batch. The backlog is bounded: a
//! handover waits while `backlog` finishes wait for the writer, so a stalled write holds
//! at most that many finished jobs beside the batch being written, and then the slots.

use std::collections::HashSet;
use std::sync::Arc;

use quire_shared::db::jobs::{self, Fence};
use quire_shared::db::{DbError, PgPool};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

/// Most finishes written by one statement.
const MAX_BATCH: usize = 256;

type Reply = Result<bool, Arc<DbError>>;

struct Finish {
    fence: Fence,
    reply: oneshot::Sender<Reply>,
}

/// The handle jobs send their finishes to; the writer task runs until every handle is
/// dropped.
#[derive(Clone)]
pub struct Completer {
    finishes: mpsc::Sender<Finish>,
}

/// A finish handed to the writer: [`Finishing::written`] answers once its batch is
/// written.
pub struct Finishing {
    answer: oneshot::Receiver<Reply>,
}

impl Finishing {
    /// True if the job's fence held and it is `SUCCEEDED` now; false if it had moved on.
    pub async fn written(self) -> anyhow::Result<bool> {
        let written = self
            .answer
            .await
            .map_err(|_| anyhow::anyhow!("the completion writer stopped"))?;
        Ok(written?)
    }
}

impl Completer {
    /// A writer whose queue holds at most `backlog` finishes (at least one).
    pub fn start(pool: PgPool, backlog: usize) -> Self {
        let (finishes, pending) = mpsc::channel(backlog.clamp(1, MAX_BATCH));
        tokio::spawn(write_batches(pool, pending));
        Self { finishes }
    }

    /// Hands over the job's fenced `RUNNING → SUCCEEDED`, to be written in a batch with
    /// whatever other finishes are waiting; waits only while the backlog is full.
    pub async fn submit(&self, fence: Fence) -> anyhow::Result<Finishing> {
        let (reply, answer) = oneshot::channel();
        self.finishes
            .send(Finish { fence, reply })
            .await
            .map_err(|_| anyhow::anyhow!("the completion writer stopped"))?;
        Ok(Finishing { answer })
    }
}

async fn write_batches(pool: PgPool, mut pending: mpsc::Receiver<Finish>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while pending.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let fences: Vec<Fence> = batch.iter().map(|finish| finish.fence.clone()).collect();
        let written = async {
            let mut conn = pool.get().await?;
            jobs::mark_succeeded_many(&mut conn, &fences).await
        }
        .await;
        metrics::histogram!(quire_shared::metrics::FINISH_BATCH_SIZE).record(fences.len() as f64);
        match written {
            Ok(done) => {
                let done: HashSet<Uuid> = done.into_iter().collect();
                for finish in batch.drain(..) {
                    let held = done.contains(&finish.fence.job_id);
                    let _ = finish.reply.send(Ok(held));
                }
            }
            Err(error) => {
                // Each job logs the failure where it handles it.
                let error = Arc::new(error);
                for finish in batch.drain(..) {
                    let _ = finish.reply.send(Err(Arc::clone(&error)));
                }
            }
        }
    }
}
