//! The queue-state refresh: computes the queue's state with bounded queries and stores
//! it, at most once per interval across every dispatcher (an advisory lock, and the
//! stored snapshot's age on the database clock). The API's admin listener serves the
//! stored snapshot, so no scrape ever counts the queue tables itself.

use std::time::Duration;

use anyhow::Context;
use quire_shared::db::PgPool;
use quire_shared::redis_client::RedisPool;

use super::Task;

pub struct QueueStateRefresh {
    pool: PgPool,
    redis: RedisPool,
    namespace: String,
    interval: Duration,
    top_tenants: usize,
}

impl QueueStateRefresh {
    /// Refreshes at most once per `interval` across the fleet, naming the `top_tenants`
    /// tenants with the most queued jobs in the per-tenant gauges.
    pub fn new(
        pool: PgPool,
        redis: RedisPool,
        namespace: String,
        interval: Duration,
        top_tenants: usize,
    ) -> Self {
        Self {
            pool,
            redis,
            namespace,
            interval,
            top_tenants,
        }
    }
}

impl Task for QueueStateRefresh {
    /// The fleet's refresh count when this pass refreshed; `None` when another
    /// dispatcher holds the lock or refreshed within the interval.
    type Report = Option<i64>;
    const NAME: &'static str = "queue-state";

    async fn run_once(&self) -> anyhow::Result<Option<i64>> {
        let mut conn = self.pool.get().await.context("no database connection")?;
        quire_shared::queue_state::refresh_if_due(
            &mut conn,
            &self.redis,
            &self.namespace,
            self.interval,
            self.top_tenants,
        )
        .await
        .context("failed to refresh the queue state")
    }
}
