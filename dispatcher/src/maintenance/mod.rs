//! Dispatcher maintenance (DESIGN §5) as services, each on its own interval with its own
//! error handling, so one failing (Redis down stops lost-message recovery) never holds
//! up another: publication-claim recovery, the rescuer, lost-message recovery,
//! retention, worker-registry pruning, the queue-state refresh and the schedule runner
//! (periodic jobs: trash emptying, integrity scrub, storage GC). Safe with any number of dispatchers: the ones that must do their
//! work once per interval hold an advisory lock while they run, and a schedule's slot is
//! claimed once in PostgreSQL.
//!
//! A new maintenance task is a file here implementing [`Task`], its `Service::start`
//! in [`Maintenance::start`], and its interval in `DispatcherSettings` and
//! `config/default.toml` (and `config/test.toml`, which runs every service fast).

mod claim_recovery;
mod lost_messages;
mod queue_state;
mod rescuer;
mod retention;
pub mod schedules;
mod service;
pub mod storage_gc;
mod worker_pruning;

use std::sync::Arc;
use std::time::Duration;

use quire_shared::config::Settings;
use quire_shared::db::PgPool;
use quire_shared::db::maintenance::Retention as Ages;
use quire_shared::redis_client::RedisPool;
use quire_shared::storage::ObjectStore;
use tokio_util::sync::CancellationToken;

pub use claim_recovery::ClaimRecovery;
pub use lost_messages::LostMessages;
pub use queue_state::QueueStateRefresh;
pub use rescuer::Rescuer;
pub use retention::Retention;
pub use schedules::Schedules;
pub use service::{Service, Task};
pub use storage_gc::StorageGc;
pub use worker_pruning::WorkerPruning;

const HOUR: u64 = 3600;
const DAY: u64 = 24 * HOUR;

/// Every maintenance service of one dispatcher, running.
pub struct Maintenance {
    services: Vec<Service>,
}

impl Maintenance {
    /// Starts every service on the process's pools and store; each stops at `shutdown`.
    pub fn start(
        settings: &Settings,
        pool: &PgPool,
        redis: &RedisPool,
        store: &Arc<dyn ObjectStore>,
        shutdown: &CancellationToken,
    ) -> Self {
        let dispatcher = &settings.dispatcher;
        let every = Duration::from_millis;
        let retention = &settings.retention;
        let ages = Ages {
            events: Duration::from_secs(retention.events_hours * HOUR),
            finished_jobs: Duration::from_secs(retention.finished_jobs_days * DAY),
            failed_jobs: Duration::from_secs(retention.failed_jobs_days * DAY),
            tenant_events: settings.events.retention(),
            batch: retention.batch_size,
        };
        let services = vec![
            Service::start(
                ClaimRecovery::new(
                    pool.clone(),
                    Duration::from_secs(dispatcher.claim_timeout_seconds),
                ),
                every(dispatcher.claim_recovery_interval_ms),
                shutdown,
            ),
            Service::start(
                Rescuer::new(pool.clone(), dispatcher.recovery_batch_size),
                every(dispatcher.rescuer_interval_ms),
                shutdown,
            ),
            Service::start(
                LostMessages::new(
                    pool.clone(),
                    redis.clone(),
                    settings.redis.namespace.clone(),
                    Duration::from_secs(dispatcher.lost_message_grace_seconds),
                    dispatcher.recovery_batch_size,
                ),
                every(dispatcher.lost_messages_interval_ms),
                shutdown,
            ),
            Service::start(
                Retention::new(pool.clone(), ages),
                every(dispatcher.retention_interval_ms),
                shutdown,
            ),
            Service::start(
                WorkerPruning::new(pool.clone()),
                every(dispatcher.worker_pruning_interval_ms),
                shutdown,
            ),
            // Every dispatcher looks twice per interval; the one that finds the stored
            // state at least an interval old (and gets the lock) refreshes it. Looking
            // once per interval would skip a refresh whenever the clocks of two passes
            // jitter, leaving the state two intervals old.
            Service::start(
                QueueStateRefresh::new(
                    pool.clone(),
                    redis.clone(),
                    settings.redis.namespace.clone(),
                    every(dispatcher.queue_state_interval_ms),
                    dispatcher.queue_state_top_tenants,
                ),
                every((dispatcher.queue_state_interval_ms / 2).max(1)),
                shutdown,
            ),
            Service::start(
                Schedules::new(pool.clone(), settings, store),
                every(settings.schedules.check_interval_ms),
                shutdown,
            ),
        ];
        Self { services }
    }

    /// Stops every service, letting passes in flight finish; stopping twice is harmless.
    pub async fn stop(&self) {
        for service in &self.services {
            service.stop().await;
        }
    }
}
