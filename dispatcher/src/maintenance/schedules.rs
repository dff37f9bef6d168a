//! The schedule runner (periodic jobs, issue 16): at each check it claims every enabled
//! schedule's due slot in PostgreSQL (`db::schedules::claim`, one guarded statement) and
//! runs the slots it won, so across any number of dispatchers each slot runs once, and
//! one missed while the fleet was down runs once on return. A run's outcome is recorded
//! on the schedule's row (what the catalogue and `/ops` show); a failing run is logged
//! once here and the next slot tries again. One file per schedule beside this one.

mod empty_trash;
mod integrity_scrub;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures_util::future::BoxFuture;
use quire_shared::config::Settings;
use quire_shared::db::PgPool;
use quire_shared::db::schedules::{self, Outcome, Slot};
use quire_shared::schedules::ScheduleName;
use quire_shared::storage::ObjectStore;

use super::Task;
use super::storage_gc::{self, StorageGc};

pub use empty_trash::EmptyTrash;
pub use integrity_scrub::IntegrityScrub;

/// One schedule's work for a slot this dispatcher claimed.
pub trait Scheduled: Send + Sync {
    fn name(&self) -> ScheduleName;

    /// Does the slot's work and says what it did, in words safe to show anyone (they are
    /// stored on the schedule's row).
    fn run<'a>(&'a self, pool: &'a PgPool, slot: &'a Slot)
    -> BoxFuture<'a, anyhow::Result<String>>;
}

/// The request id the jobs of a slot carry, so their logs lead back to the slot.
pub fn request_id(slot: &Slot) -> Option<String> {
    Some(format!("schedule-{}-{}", slot.name, slot.runs))
}

/// A slot this pass ran.
#[derive(Debug, Clone)]
pub struct Ran {
    pub slot: Slot,
    pub outcome: Outcome,
    pub detail: String,
}

pub struct Schedules {
    pool: PgPool,
    schedules: Vec<(Duration, Box<dyn Scheduled>)>,
}

impl Schedules {
    /// The enabled schedules of `settings` (`[schedules]`); the storage GC collects in
    /// `store`.
    pub fn new(pool: PgPool, settings: &Settings, store: &Arc<dyn ObjectStore>) -> Self {
        let config = &settings.schedules;
        let attempts = settings.jobs.max_attempts;
        let mut schedules: Vec<(Duration, Box<dyn Scheduled>)> = Vec::new();
        for name in ScheduleName::ALL {
            let Some(every) = name.every(config) else {
                continue;
            };
            let schedule: Box<dyn Scheduled> = match name {
                ScheduleName::EmptyTrash => {
                    Box::new(EmptyTrash::new(&config.empty_trash, attempts))
                }
                ScheduleName::IntegrityScrub => {
                    Box::new(IntegrityScrub::new(&config.integrity_scrub, attempts))
                }
                ScheduleName::StorageGc => Box::new(StorageGc::new(
                    Arc::clone(store),
                    storage_gc::Budget {
                        grace: settings.storage_gc.grace(),
                        batch_size: settings.storage_gc.batch_size,
                        batches_per_pass: settings.storage_gc.batches_per_pass,
                    },
                )),
            };
            schedules.push((every, schedule));
        }
        Self { pool, schedules }
    }
}

impl Task for Schedules {
    /// The slots this pass claimed and ran.
    type Report = Vec<Ran>;
    const NAME: &'static str = "schedules";

    async fn run_once(&self) -> anyhow::Result<Vec<Ran>> {
        let mut ran = Vec::new();
        for (every, schedule) in &self.schedules {
            let name = schedule.name().as_str();
            let slot = {
                let mut conn = self.pool.get().await.context("no database connection")?;
                schedules::claim(&mut conn, name, *every)
                    .await
                    .with_context(|| format!("failed to claim the {name} slot"))?
            };
            let Some(slot) = slot else {
                continue;
            };
            tracing::info!(schedule = name, run = slot.runs, next_run_at = %slot.next_run_at, "schedule slot claimed");
            let (outcome, detail) = match schedule.run(&self.pool, &slot).await {
                Ok(detail) => {
                    tracing::info!(
                        schedule = name,
                        run = slot.runs,
                        detail,
                        "scheduled run done"
                    );
                    (Outcome::Succeeded, detail)
                }
                Err(error) => {
                    tracing::warn!(
                        schedule = name,
                        run = slot.runs,
                        error = format!("{error:#}"),
                        "scheduled run failed; the next slot tries again"
                    );
                    (
                        Outcome::Failed,
                        "the run failed (the dispatcher's log says why); the next slot tries again"
                            .to_owned(),
                    )
                }
            };
            let mut conn = self.pool.get().await.context("no database connection")?;
            schedules::finish(&mut conn, &slot, outcome, &detail)
                .await
                .with_context(|| format!("failed to record the {name} run"))?;
            ran.push(Ran {
                slot,
                outcome,
                detail,
            });
        }
        Ok(ran)
    }
}
