//! Retention (DESIGN §5): delivered and cancelled events and finished jobs are deleted
//! after their configured ages (`FAILED` jobs are kept longer), expired dashboard
//! sessions and idempotency keys, and tenant events past `[events] retention_hours`, in
//! batches. One dispatcher per interval (an advisory lock).

use anyhow::Context;
use futures_util::FutureExt;
use quire_shared::db::PgPool;
use quire_shared::db::maintenance::{self, Pruned, Retention as Ages, locks};

use super::Task;

pub struct Retention {
    pool: PgPool,
    ages: Ages,
}

impl Retention {
    pub fn new(pool: PgPool, ages: Ages) -> Self {
        Self { pool, ages }
    }
}

impl Task for Retention {
    /// What the pass deleted; `None` when another dispatcher held this interval.
    type Report = Option<Pruned>;
    const NAME: &'static str = "retention";

    async fn run_once(&self) -> anyhow::Result<Option<Pruned>> {
        let mut conn = self.pool.get().await.context("no database connection")?;
        let ages = self.ages;
        let pruned = maintenance::once_per_tick(&mut conn, locks::RETENTION, |conn| {
            async move { maintenance::prune(conn, &ages).await }.boxed()
        })
        .await
        .context("failed to prune finished work")?;
        if let Some(pruned) = pruned
            && (pruned.events > 0
                || pruned.jobs > 0
                || pruned.sessions > 0
                || pruned.idempotency_keys > 0
                || pruned.tenant_events > 0)
        {
            tracing::info!(
                events = pruned.events,
                jobs = pruned.jobs,
                sessions = pruned.sessions,
                idempotency_keys = pruned.idempotency_keys,
                tenant_events = pruned.tenant_events,
                "pruned finished work"
            );
        }
        Ok(pruned)
    }
}
