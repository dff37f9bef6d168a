//! The rescuer (DESIGN §5): `RUNNING` jobs whose lease expired (their worker died or
//! hung) go back to `QUEUED` with a new event, or end `FAILED` (`worker_lost`) when
//! their attempts are spent. One dispatcher per interval (an advisory lock).

use anyhow::Context;
use futures_util::FutureExt;
use quire_shared::db::PgPool;
use quire_shared::db::maintenance::{self, Rescued, locks};

use super::Task;

pub struct Rescuer {
    pool: PgPool,
    batch: i64,
}

impl Rescuer {
    pub fn new(pool: PgPool, batch: i64) -> Self {
        Self { pool, batch }
    }
}

impl Task for Rescuer {
    /// What the pass rescued; `None` when another dispatcher held this interval.
    type Report = Option<Rescued>;
    const NAME: &'static str = "rescuer";

    async fn run_once(&self) -> anyhow::Result<Option<Rescued>> {
        let mut conn = self.pool.get().await.context("no database connection")?;
        let batch = self.batch;
        let rescued = maintenance::once_per_tick(&mut conn, locks::RESCUER, |conn| {
            maintenance::rescue_expired_leases(conn, batch).boxed()
        })
        .await
        .context("failed to rescue expired leases")?;
        if let Some(rescued) = rescued
            && (rescued.requeued > 0 || rescued.failed > 0)
        {
            metrics::counter!(quire_shared::metrics::RESCUES)
                .increment((rescued.requeued + rescued.failed) as u64);
            tracing::warn!(
                requeued = rescued.requeued,
                failed = rescued.failed,
                "rescued jobs whose worker stopped responding"
            );
        }
        Ok(rescued)
    }
}
