//! Publishing claimed outbox events (DESIGN §4 step 2), the one home of it: their
//! messages pushed to Redis in one pipeline on a kept connection, then marked
//! `PUBLISHED`; a failed push returns them to `PENDING` with a bounded backoff. Two
//! callers claim events: the dispatcher's scheduling round, and the express path
//! ([`Express`]): the process whose intake statement claimed its own event at commit,
//! because its queue had no backlog (docs/decisions.md, "The express path").

use std::sync::Mutex;
use std::time::Duration;

use deadpool_redis::redis;
use uuid::Uuid;

use crate::broker::{self, EventMessage, WireMessage};
use crate::config::Settings;
use crate::db::outbox::{self, ClaimedEvent, Published, Retry};
use crate::db::{DbError, PgPool};
use crate::redis_client::{BrokerError, RedisConnection, RedisPool};
use crate::retry::Backoff;

mod marks;

pub use marks::{Marks, PublishedBy};

/// Safe text stored on an event whose push failed (no addresses, no Redis error text).
pub const BROKER_UNAVAILABLE: &str = "the broker did not accept the message";
/// Safe text stored on an event whose stored message could not be read.
pub const MALFORMED_MESSAGE: &str = "the stored message could not be read";

/// The pushes of one batch of claimed events.
pub struct Batch {
    pub pipeline: redis::Pipeline,
    /// What to mark published once Redis answered.
    pub published: Vec<Published>,
    /// Events whose stored message could not be read: set aside with the longest delay.
    pub malformed: Vec<Retry>,
}

/// One push per event, in the given order, in one pipeline: each stored message with
/// this publication's task id and the database time of its claim.
pub fn batch(namespace: &str, events: &[ClaimedEvent], malformed_delay: Duration) -> Batch {
    let mut pipeline = redis::pipe();
    let mut published = Vec::with_capacity(events.len());
    let mut malformed = Vec::new();
    for event in events {
        let message = serde_json::from_value::<EventMessage>(event.message.clone())
            .ok()
            .and_then(|message| {
                let task_id = Uuid::now_v7();
                tracing::debug!(
                    event_id = %event.id,
                    job_id = %event.job_id,
                    request_id = message.request_id.as_deref().unwrap_or_default(),
                    "publishing event"
                );
                // Stamped with the database time of the claim, not this host's clock:
                // lost-message recovery compares it with `published_at`, which the
                // database sets after the push.
                let wire = WireMessage::publish(message, task_id, event.claimed_at);
                serde_json::to_string(&wire)
                    .ok()
                    .map(|text| (task_id, text))
            });
        match message {
            Some((task_id, text)) => {
                broker::push(
                    &mut pipeline,
                    &broker::queue_key(namespace, &event.queue),
                    &text,
                );
                published.push(Published {
                    event_id: event.id,
                    task_id,
                });
            }
            None => {
                tracing::error!(event_id = %event.id, job_id = %event.job_id, "outbox event has a malformed message");
                malformed.push(Retry {
                    event_id: event.id,
                    delay: malformed_delay,
                });
            }
        }
    }
    Batch {
        pipeline,
        published,
        malformed,
    }
}

/// The backoff of an event whose push failed (`dispatcher.publish_backoff_*`), for every
/// publisher alike.
pub fn event_backoff(settings: &Settings) -> Backoff {
    Backoff::new(
        Duration::from_millis(settings.dispatcher.publish_backoff_base_ms),
        Duration::from_millis(settings.dispatcher.publish_backoff_max_ms),
    )
}

/// Pushes pipelines on one kept connection: every pool checkout sends UNWATCH and PING
/// first, a round trip on the path of every job.
pub struct Pusher {
    redis: RedisPool,
    kept: Mutex<Option<RedisConnection>>,
}

impl Pusher {
    pub fn new(redis: RedisPool) -> Self {
        Self {
            redis,
            kept: Mutex::new(None),
        }
    }

    /// Sends the pipeline on the kept connection; if that fails (Redis restarted, the
    /// socket died, another push has it), once more on a fresh one from the pool, which
    /// checks it first. A push the broken connection half delivered is then repeated: a
    /// duplicate message is harmless (the worker's claim matches the job's current
    /// event).
    pub async fn push(&self, pipeline: &redis::Pipeline) -> Result<(), BrokerError> {
        let kept = self.kept.lock().map(|mut kept| kept.take()).ok().flatten();
        if let Some(mut conn) = kept {
            match pipeline.query_async::<()>(&mut conn).await {
                Ok(()) => {
                    self.keep(conn);
                    return Ok(());
                }
                Err(error) => {
                    tracing::debug!(%error, "kept redis connection failed, pushing on a fresh one");
                }
            }
        }
        let mut conn = self.redis.get().await?;
        pipeline.query_async::<()>(&mut conn).await?;
        self.keep(conn);
        Ok(())
    }

    fn keep(&self, conn: RedisConnection) {
        if let Ok(mut kept) = self.kept.lock() {
            *kept = Some(conn);
        }
    }
}

/// The express path's settings and pusher, for a process that records intakes (the API,
/// the bench's client): its intakes claim their own event when the queue has no backlog
/// (`db::intake::ExpressClaim`), and [`Express::publish`] publishes it after the commit.
pub struct Express {
    claimer: String,
    namespace: String,
    in_flight_per_queue: i64,
    default_cap: i64,
    backoff: Backoff,
    pusher: Pusher,
    marks: Marks,
    pool: PgPool,
}

impl Express {
    /// `None` when `scheduling.express` is off: every event then waits for a dispatcher.
    /// Call inside the runtime: the writer of its marks is spawned at once.
    pub fn from_settings(
        settings: &Settings,
        process: &str,
        pool: PgPool,
        redis: RedisPool,
    ) -> Option<Self> {
        settings.scheduling.express.then(|| {
            let claimer = format!("{process}-{}", Uuid::new_v4().simple());
            Self {
                namespace: settings.redis.namespace.clone(),
                in_flight_per_queue: settings.scheduling.in_flight_per_queue,
                default_cap: settings.scheduling.max_running_per_tenant,
                backoff: event_backoff(settings),
                pusher: Pusher::new(redis),
                marks: Marks::start(pool.clone(), claimer.clone(), PublishedBy::Express),
                claimer,
                pool,
            }
        })
    }

    /// What an intake statement needs to claim its event.
    pub fn claim(&self) -> crate::db::intake::ExpressClaim<'_> {
        crate::db::intake::ExpressClaim {
            claimer: &self.claimer,
            in_flight_per_queue: self.in_flight_per_queue,
            default_cap: self.default_cap,
        }
    }

    /// Publishes an event its intake claimed, once that intake has COMMITTED (before,
    /// a worker's claim would not find the job). Never fails the caller: a failed push
    /// returns the event to `PENDING` for the dispatchers, with its backoff, and if even
    /// that fails (or this process dies first) the claim expires after
    /// `dispatcher.claim_timeout_seconds` and claim recovery returns it.
    pub async fn publish(&self, event: ClaimedEvent) {
        let (event_id, job_id) = (event.id, event.job_id);
        if let Err(error) = self.try_publish(event).await {
            tracing::warn!(%event_id, %job_id, error = %error, "express publish failed, the dispatcher publishes it");
        }
    }

    /// Writes the marks of every event published so far (`marks`): at a graceful
    /// shutdown, so that no claim is left for claim recovery to publish again.
    pub async fn flush(&self) {
        self.marks.flush().await;
    }

    async fn try_publish(&self, event: ClaimedEvent) -> Result<(), DbError> {
        let attempts = event.publish_attempts.max(0) as u32;
        let batch = batch(
            &self.namespace,
            std::slice::from_ref(&event),
            self.backoff.max,
        );
        if !batch.malformed.is_empty() {
            let mut conn = self.pool.get().await?;
            outbox::release_for_retry(
                &mut conn,
                &self.claimer,
                &batch.malformed,
                MALFORMED_MESSAGE,
            )
            .await?;
            return Ok(());
        }
        match self.pusher.push(&batch.pipeline).await {
            Ok(()) => {
                // Marked a linger later, after the worker's claim (`marks`).
                self.marks.mark(batch.published).await;
            }
            Err(error) => {
                tracing::warn!(event_id = %event.id, %error, "express push failed, returning the event to the dispatchers");
                let retry = Retry {
                    event_id: event.id,
                    delay: self.backoff.delay(attempts + 1),
                };
                let mut conn = self.pool.get().await?;
                outbox::release_for_retry(&mut conn, &self.claimer, &[retry], BROKER_UNAVAILABLE)
                    .await?;
                metrics::counter!(crate::metrics::PUBLISH_FAILURES).increment(1);
            }
        }
        Ok(())
    }
}
