//! Worker-registry pruning: forgets the `workers` rows of workers that stopped without
//! removing their own (killed, or their host died). Operators read that table; the job
//! path never does. Idempotent, so every dispatcher runs it without a lock.

use anyhow::Context;
use quire_shared::db::{PgPool, workers};

use super::Task;

pub struct WorkerPruning {
    pool: PgPool,
}

impl WorkerPruning {
    pub fn new(pool: PgPool) -> Self {
        Self { pool }
    }
}

impl Task for WorkerPruning {
    /// Worker rows deleted.
    type Report = usize;
    const NAME: &'static str = "worker-pruning";

    async fn run_once(&self) -> anyhow::Result<usize> {
        let mut conn = self.pool.get().await.context("no database connection")?;
        let pruned = workers::prune_gone(&mut conn)
            .await
            .context("failed to forget gone workers")?;
        if pruned > 0 {
            tracing::info!(count = pruned, "forgot workers not seen for an hour");
        }
        Ok(pruned)
    }
}
