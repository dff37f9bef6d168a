//! The publish loop: choose and claim the next due events (the scheduler:
//! `quire_shared::scheduling`), push them to Redis in one pipeline, mark them
//! `PUBLISHED` only after Redis answered (a linger later, by the process's mark writer:
//! `publishing::Marks`); on failure return them to `PENDING` with a bounded backoff and
//! back off the loop itself.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use quire_shared::config::Settings;
use quire_shared::db::PgPool;
use quire_shared::db::outbox::{self, Retry};
use quire_shared::db::scheduler;
use quire_shared::publishing::{self, BROKER_UNAVAILABLE, Batch, MALFORMED_MESSAGE, Marks, Pusher};
use quire_shared::redis_client::RedisPool;
use quire_shared::retry::{Backoff, ReconnectBackoff};
use quire_shared::scheduling::Limits;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub struct Publisher {
    id: String,
    pool: PgPool,
    /// Pushes on a kept connection (`publishing::Pusher`).
    pusher: Pusher,
    /// Writes the marks of pushed events, off the loop's path.
    marks: Marks,
    namespace: String,
    limits: Limits,
    /// `scheduling.max_running_per_tenant`: a tenant's cap unless it sets its own.
    default_cap: i64,
    poll_interval: Duration,
    event_backoff: Backoff,
}

/// What one round of the loop did.
enum Round {
    /// Published some while more was due than the plan took: room may have come since
    /// (claims and finishes happened meanwhile), so the loop plans again at once.
    MoreDue,
    /// Nothing due is left that the round saw (perhaps after publishing it all): the
    /// loop waits for a NOTIFY (a new event's commit, a finish) or the poll interval. A
    /// NOTIFY that came during the round ends the wait at once.
    Idle,
}

impl Publisher {
    /// A publisher on the process's pools (the dispatcher's session mode). Call inside
    /// the runtime: the writer of its marks is spawned at once.
    pub fn new(settings: &Settings, pool: PgPool, redis: RedisPool) -> Self {
        let dispatcher = &settings.dispatcher;
        let id = format!("dispatcher-{}", Uuid::new_v4().simple());
        Self {
            marks: Marks::start(
                pool.clone(),
                id.clone(),
                publishing::PublishedBy::Dispatcher,
            ),
            id,
            pool,
            pusher: Pusher::new(redis),
            namespace: settings.redis.namespace.clone(),
            limits: Limits::from_settings(settings),
            default_cap: settings.scheduling.max_running_per_tenant,
            poll_interval: dispatcher.poll_interval(),
            event_backoff: publishing::event_backoff(settings),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Publishes until `shutdown`, then writes the marks still waiting (so that no claim
    /// is left for claim recovery to publish again); woken by `wake` (NOTIFY) or the poll
    /// interval.
    pub async fn run(&self, wake: Arc<Notify>, shutdown: CancellationToken) {
        let mut failures = ReconnectBackoff::new();
        while !shutdown.is_cancelled() {
            let pause = match self.round().await {
                Ok(Round::MoreDue) => {
                    failures.reset();
                    continue;
                }
                Ok(_) => {
                    if failures.reset() {
                        tracing::info!("publishing works again");
                    }
                    None
                }
                Err(error) => {
                    let delay = failures.next_delay();
                    tracing::warn!(
                        error = format!("{error:#}"),
                        retry_in_ms = delay.as_millis() as u64,
                        "publish round failed"
                    );
                    Some(delay)
                }
            };
            let wait = pause.unwrap_or(self.poll_interval);
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = wake.notified(), if pause.is_none() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
        self.marks.flush().await;
    }

    /// Plans which due events go next, claims them and publishes them. The push goes
    /// out while the round's commit is on its way (docs/decisions.md, "The round commits
    /// while its messages travel"): a worker's claim needs the job row, not the event's,
    /// so the message may arrive first, and the commit's round trip leaves the path of
    /// the job. The mark still waits for both, and is written a linger later by the
    /// mark writer while the loop plans its next round.
    async fn round(&self) -> anyhow::Result<Round> {
        let mut conn = self.pool.get().await.context("no database connection")?;
        let scheduler::RoundClaims { events, more_due } =
            scheduler::open_round(&mut conn, &self.id, &self.limits, self.default_cap)
                .await
                .context("failed to claim due events")?;
        // Plan again at once only after publishing with more due: until 2026-12-04 every
        // round that published did, and with nothing left due that second round found
        // nothing, a wasted round (four statements under the scheduling lock) beside
        // every published job's claim. A round that published nothing waits as before:
        // what holds its due events back (a bound, a cap) frees with a finish's NOTIFY.
        let next = if more_due && !events.is_empty() {
            Round::MoreDue
        } else {
            Round::Idle
        };
        let Batch {
            pipeline,
            published,
            malformed,
        } = publishing::batch(&self.namespace, &events, self.event_backoff.max);
        if !malformed.is_empty() {
            // In the round's transaction: set aside with the claims they came with.
            if let Err(error) =
                outbox::release_for_retry(&mut conn, &self.id, &malformed, MALFORMED_MESSAGE).await
            {
                let _ = scheduler::rollback_round(&mut conn).await;
                return Err(error).context("failed to set malformed events aside");
            }
        }
        if published.is_empty() {
            scheduler::commit_round(&mut conn)
                .await
                .context("failed to commit the round")?;
            return Ok(next);
        }
        let (committed, pushed) = tokio::join!(
            scheduler::commit_round(&mut conn),
            self.pusher.push(&pipeline)
        );
        // A claim that did not commit is `PENDING` again, and the next round publishes it
        // anew: a message this push delivered becomes a duplicate, which a worker's
        // claim refuses (DESIGN §4: the claim matches the job's current event).
        committed.context("failed to commit the round's claims")?;
        match pushed {
            Ok(()) => {
                fail_point_after_push();
                tracing::debug!(count = published.len(), "events pushed");
                metrics::histogram!(quire_shared::metrics::PUBLISH_BATCH_SIZE)
                    .record(published.len() as f64);
                // Counted in `quire_events_published_total` when the mark is written.
                self.marks.mark(published).await;
                Ok(next)
            }
            Err(error) => {
                let retries: Vec<Retry> = events
                    .iter()
                    .map(|event| Retry {
                        event_id: event.id,
                        delay: self
                            .event_backoff
                            .delay(event.publish_attempts.max(0) as u32 + 1),
                    })
                    .collect();
                outbox::release_for_retry(&mut conn, &self.id, &retries, BROKER_UNAVAILABLE)
                    .await
                    .context("failed to return unpublished events")?;
                metrics::counter!(quire_shared::metrics::PUBLISH_FAILURES).increment(1);
                Err(anyhow::Error::from(error).context("redis did not take the pipeline"))
            }
        }
    }
}

/// Fault suite only: `QUIRE_FAILPOINT_ABORT_AFTER_PUSH=1` kills the process between the
/// Redis push and marking the events published — the window the outbox must survive.
#[cfg(feature = "fault-injection")]
fn fail_point_after_push() {
    if std::env::var_os("QUIRE_FAILPOINT_ABORT_AFTER_PUSH").is_some() {
        tracing::warn!("fail-point: aborting between push and mark-published");
        std::process::abort();
    }
}

#[cfg(not(feature = "fault-injection"))]
fn fail_point_after_push() {}
