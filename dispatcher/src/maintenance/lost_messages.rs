//! Lost-message recovery (DESIGN §5): a `QUEUED` job whose current event was published
//! before the oldest message still in its list (or before `now() - grace` when the list
//! is empty) was popped and never claimed, or Redis lost it: it gets a new event. "Before"
//! compares the event's `published_at` with the push time the oldest message carries,
//! both database times; a list whose oldest message cannot be read is skipped (counted
//! in `quire_lost_messages_unknown_tail_total`). One dispatcher per interval (an
//! advisory lock).
//!
//! A pass looks at the jobs the mark recorded as announced, which the scheduler's bound
//! keeps few however long the backlog; a dispatcher's first pass and every
//! [`SWEEP_EVERY`]th after it look at every queued job, which also finds a job the mark
//! could not record (its row was locked that instant) and costs a read of the backlog
//! (docs/decisions.md, "Lookups by key ignore the statistics").

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use futures_util::FutureExt;
use quire_shared::broker;
use quire_shared::db::PgPool;
use quire_shared::db::maintenance::{self, LostScope, locks};
use quire_shared::redis_client::RedisPool;

use super::Task;

/// Every this many passes (5 minutes at the default interval), a pass looks at every
/// queued job rather than the announced ones.
pub const SWEEP_EVERY: u64 = 60;

pub struct LostMessages {
    pool: PgPool,
    redis: RedisPool,
    namespace: String,
    grace: Duration,
    batch: i64,
    passes: AtomicU64,
}

impl LostMessages {
    pub fn new(
        pool: PgPool,
        redis: RedisPool,
        namespace: String,
        grace: Duration,
        batch: i64,
    ) -> Self {
        Self {
            pool,
            redis,
            namespace,
            grace,
            batch,
            passes: AtomicU64::new(0),
        }
    }
}

impl Task for LostMessages {
    /// Jobs announced again; `None` when another dispatcher held this interval.
    type Report = Option<usize>;
    const NAME: &'static str = "lost-messages";

    async fn run_once(&self) -> anyhow::Result<Option<usize>> {
        let types: Vec<&str> = quire_shared::jobs::job_types().collect();
        // Without Redis nobody can tell a lost message from a queued one: the pass fails
        // and changes nothing.
        let oldest = broker::oldest_pushed_at(&self.redis, &self.namespace, &types)
            .await
            .context("failed to read the oldest message of each list")?;
        let mut conn = self.pool.get().await.context("no database connection")?;
        let (grace, batch) = (self.grace, self.batch);
        let scope = scope_of_pass(self.passes.fetch_add(1, Ordering::Relaxed));
        let reannounced = maintenance::once_per_tick(&mut conn, locks::LOST_MESSAGES, |conn| {
            async move {
                let mut total = 0;
                for (job_type, tail) in &oldest {
                    let pushed_at = match tail {
                        broker::Tail::Empty => None,
                        broker::Tail::Pushed(at) => Some(*at),
                        // A message nobody can date says nothing about the ones before
                        // it: reading it as an empty list would announce a whole
                        // backlog again. This list waits until a worker pops it.
                        broker::Tail::Unknown => {
                            metrics::counter!(
                                quire_shared::metrics::LOST_MESSAGES_UNKNOWN_TAIL,
                                "job_type" => job_type.clone()
                            )
                            .increment(1);
                            tracing::warn!(
                                job_type = %job_type,
                                "oldest message of the list does not parse, skipping it this pass"
                            );
                            continue;
                        }
                    };
                    total += maintenance::reannounce_lost(
                        conn, job_type, pushed_at, grace, batch, scope,
                    )
                    .await?;
                }
                Ok(total)
            }
            .boxed()
        })
        .await
        .context("failed to announce lost messages again")?;
        if let Some(count @ 1..) = reannounced {
            metrics::counter!(quire_shared::metrics::REPUBLISHED).increment(count as u64);
            tracing::warn!(count, "re-announced jobs whose message was lost");
        }
        Ok(reannounced)
    }
}

/// What pass `pass` (0 for a dispatcher's first) looks at: every queued job on the first
/// and every [`SWEEP_EVERY`]th after it, the announced ones otherwise.
fn scope_of_pass(pass: u64) -> LostScope {
    if pass.is_multiple_of(SWEEP_EVERY) {
        LostScope::Everything
    } else {
        LostScope::Announced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_pass_and_every_sweep_every_th_after_it_look_at_every_queued_job() {
        let sweeps: Vec<u64> = (0..=3 * SWEEP_EVERY)
            .filter(|&pass| scope_of_pass(pass) == LostScope::Everything)
            .collect();
        assert_eq!(sweeps, [0, SWEEP_EVERY, 2 * SWEEP_EVERY, 3 * SWEEP_EVERY]);
    }
}
