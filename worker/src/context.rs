//! What this worker process shares between its slots.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use quire_shared::config::{DatabaseSettings, Settings};
use quire_shared::db::{self, PgPool};
use quire_shared::jobs::{JobContext, RetryClass};
use quire_shared::retry::Backoff;
use uuid::Uuid;

use crate::completer::Completer;

pub struct WorkerContext {
    /// What each handler gets: the worker id, the pool, the object store, the settings.
    pub jobs: JobContext,
    pub lease: Duration,
    pub retry_backoff: Backoff,
    /// The retry backoff of webhook deliveries (`webhooks.retry_backoff_*`).
    pub webhook_backoff: Backoff,
    /// Writes successes without completion writes in batches.
    pub completer: Completer,
}

impl WorkerContext {
    /// Starts the completion writer: call it inside the runtime.
    pub fn new(settings: &Settings) -> anyhow::Result<Self> {
        let database = DatabaseSettings {
            pool_size: Some(settings.worker_pool_size()),
            ..settings.database.clone()
        };
        let pool = db::build_pool_with(&database, db::SessionKind::Worker)?;
        let store = quire_shared::storage::build(&settings.storage)
            .context("failed to open the object store")?;
        Ok(Self {
            // At most as many finished jobs wait for the writer as the worker has slots.
            completer: Completer::start(pool.clone(), settings.worker.concurrency),
            jobs: JobContext {
                // Random per process start: a restarted worker never mistakes an old
                // claim for its own.
                worker_id: format!(
                    "worker-{}-{}",
                    std::process::id(),
                    &Uuid::new_v4().simple().to_string()[..12]
                ),
                pool,
                store,
                settings: Arc::new(settings.clone()),
                claimed_version: None,
            },
            lease: Duration::from_secs(settings.worker.lease_seconds),
            retry_backoff: Backoff::new(
                Duration::from_millis(settings.worker.retry_backoff_base_ms),
                Duration::from_millis(settings.worker.retry_backoff_max_ms),
            ),
            webhook_backoff: settings.webhooks.retry_backoff(),
        })
    }

    /// The backoff between the attempts of a job of this retry class.
    pub fn backoff_for(&self, class: RetryClass) -> Backoff {
        match class {
            RetryClass::Webhook => self.webhook_backoff,
            RetryClass::Backoff | RetryClass::ShortLived => self.retry_backoff,
        }
    }

    pub fn worker_id(&self) -> &str {
        &self.jobs.worker_id
    }

    pub fn pool(&self) -> &PgPool {
        &self.jobs.pool
    }
}
