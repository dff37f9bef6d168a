//! The fault suite: the real binaries (1 api, 2 dispatchers, 3 workers) as child
//! processes against real PostgreSQL and Redis, killed and restarted for real. Every
//! scenario counts, per job, what was lost, duplicated or unexpected, the way Jepsen's
//! queue checker does, using the `fault-test` oracle job: its effect is a row keyed by
//! job id, written in the same transaction as the job's success.
//!
//! Scenarios run one at a time (they load both cores). `QUIRE_FAULT_SCALE=10`
//! (scripts/faults-10x) multiplies job counts and fault counts for a manual run.

mod cancel;
mod dispatcher_crash;
mod documents_on_s3;
mod drain;
mod kill_workers;
mod oracle;
mod panic;
mod poison;
mod postgres_restart;
mod redis_restarts;
pub mod stack;

use tokio::sync::{Mutex, MutexGuard};

static SERIAL: Mutex<()> = Mutex::const_new(());

/// Held for a whole scenario, and by every other test that loads both cores for long
/// (the contract run, the fleet, the 400-megapixel image): two of them at once starve
/// each other's deadlines and response times.
pub async fn one_at_a_time() -> MutexGuard<'static, ()> {
    SERIAL.lock().await
}

/// The scale factor of this run (1 in CI).
pub fn scale() -> usize {
    std::env::var("QUIRE_FAULT_SCALE")
        .ok()
        .and_then(|value| value.parse().ok())
        .filter(|&scale| scale >= 1)
        .unwrap_or(1)
}
