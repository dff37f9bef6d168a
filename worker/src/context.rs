//! What every job run shares.

use std::sync::Arc;
use std::time::Duration;

use quire_shared::config::Settings;
use quire_shared::db::{self, PgPool};
use quire_shared::retry::Backoff;
use quire_shared::storage::{LocalStore, ObjectStore};
use uuid::Uuid;

use crate::completer::Completer;
use crate::handlers::Registry;

pub struct WorkerContext {
    /// Random per process start: a restarted worker never mistakes an old claim for its own.
    pub worker_id: String,
    pub pool: PgPool,
    pub store: Arc<dyn ObjectStore>,
    pub handlers: Registry,
    pub lease: Duration,
    pub retry_backoff: Backoff,
    /// Writes successes without completion writes in batches.
    pub completer: Completer,
}

impl WorkerContext {
    /// Starts the completion writer: call it inside the runtime.
    pub fn new(settings: &Settings) -> anyhow::Result<Self> {
        let pool = db::build_pool_with(&settings.database, db::SessionMode::WORKER)?;
        Ok(Self {
            worker_id: format!(
                "worker-{}-{}",
                std::process::id(),
                &Uuid::new_v4().simple().to_string()[..12]
            ),
            completer: Completer::start(pool.clone()),
            pool,
            store: Arc::new(LocalStore::new(&settings.storage.data_dir)),
            handlers: Registry::standard(settings),
            lease: Duration::from_secs(settings.worker.lease_seconds),
            retry_backoff: Backoff::new(
                Duration::from_millis(settings.worker.retry_backoff_base_ms),
                Duration::from_millis(settings.worker.retry_backoff_max_ms),
            ),
        })
    }
}
