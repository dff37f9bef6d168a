//! Dispatcher maintenance (DESIGN §5), safe with any number of dispatchers: expired
//! publication claims, the rescuer, lost-message recovery and retention, every
//! `maintenance_interval`. Tasks that must run once per tick hold an advisory lock.

use std::time::Duration;

use deadpool_redis::redis;
use futures_util::FutureExt;
use quire_shared::broker::{self, WireMessage};
use quire_shared::config::Settings;
use quire_shared::db::maintenance::{self, Retention, locks};
use quire_shared::db::{self, DbError, PgPool, outbox};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub struct Maintenance {
    pool: PgPool,
    redis: quire_shared::broker::RedisPool,
    namespace: String,
    interval: Duration,
    claim_timeout: Duration,
    grace: Duration,
    batch: i64,
    retention: Retention,
}

const HOUR: u64 = 3600;
const DAY: u64 = 24 * HOUR;

impl Maintenance {
    pub fn new(settings: &Settings) -> anyhow::Result<Self> {
        let dispatcher = &settings.dispatcher;
        let retention = &settings.retention;
        Ok(Self {
            pool: db::build_pool_with(&settings.database, db::SessionMode::DISPATCHER)?,
            redis: broker::build_pool(&settings.redis)?,
            namespace: settings.redis.namespace.clone(),
            interval: Duration::from_millis(dispatcher.maintenance_interval_ms),
            claim_timeout: Duration::from_secs(dispatcher.claim_timeout_seconds),
            grace: Duration::from_secs(dispatcher.lost_message_grace_seconds),
            batch: dispatcher.recovery_batch_size,
            retention: Retention {
                events: Duration::from_secs(retention.events_hours * HOUR),
                finished_jobs: Duration::from_secs(retention.finished_jobs_days * DAY),
                failed_jobs: Duration::from_secs(retention.failed_jobs_days * DAY),
                batch: retention.batch_size,
            },
        })
    }

    pub async fn run(self, shutdown: CancellationToken) {
        let mut ticks = tokio::time::interval(self.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = ticks.tick() => {}
            }
            if let Err(error) = self.tick().await {
                tracing::warn!(%error, "maintenance tick failed, trying again next tick");
            }
        }
    }

    async fn tick(&self) -> Result<(), DbError> {
        let mut conn = self.pool.get().await?;
        let released = outbox::recover_expired_claims(&mut conn, self.claim_timeout).await?;
        if released > 0 {
            tracing::warn!(
                count = released,
                "returned abandoned publication claims to pending"
            );
        }

        let batch = self.batch;
        if let Some(rescued) = maintenance::once_per_tick(&mut conn, locks::RESCUER, |conn| {
            maintenance::rescue_expired_leases(conn, batch).boxed()
        })
        .await?
            && (rescued.requeued > 0 || rescued.failed > 0)
        {
            metrics::counter!(quire_shared::metrics::RESCUES)
                .increment((rescued.requeued + rescued.failed) as u64);
            tracing::warn!(
                requeued = rescued.requeued,
                failed = rescued.failed,
                "rescued jobs whose worker stopped responding"
            );
        }

        // Without Redis nobody can tell a lost message from a queued one: skip the tick.
        if let Some(oldest) = self.oldest_messages().await {
            let grace = self.grace;
            let reannounced = maintenance::once_per_tick(&mut conn, locks::LOST_MESSAGES, |conn| {
                async move {
                    let mut total = 0;
                    for (job_type, oldest_event) in oldest {
                        total += maintenance::reannounce_lost(
                            conn,
                            job_type,
                            oldest_event,
                            grace,
                            batch,
                        )
                        .await?;
                    }
                    Ok(total)
                }
                .boxed()
            })
            .await?;
            if let Some(count @ 1..) = reannounced {
                metrics::counter!(quire_shared::metrics::REPUBLISHED).increment(count as u64);
                tracing::warn!(count, "re-announced jobs whose message was lost");
            }
        }

        let retention = self.retention;
        if let Some(pruned) = maintenance::once_per_tick(&mut conn, locks::RETENTION, |conn| {
            async move { maintenance::prune(conn, &retention).await }.boxed()
        })
        .await?
            && (pruned.events > 0 || pruned.jobs > 0)
        {
            tracing::info!(
                events = pruned.events,
                jobs = pruned.jobs,
                "pruned finished work"
            );
        }
        Ok(())
    }

    /// The event id of the oldest message in each job type's list (`None` for an empty
    /// list or an unreadable message), or `None` when Redis does not answer.
    async fn oldest_messages(&self) -> Option<Vec<(&'static str, Option<Uuid>)>> {
        let mut conn = self.redis.get().await.ok()?;
        let mut oldest = Vec::new();
        for job_type in quire_shared::jobs::job_types() {
            let key = broker::queue_key(&self.namespace, job_type);
            // LPUSH adds at the head and the worker pops from the tail: the tail is the oldest.
            let tail: Option<String> = redis::cmd("LINDEX")
                .arg(&key)
                .arg(-1)
                .query_async(&mut conn)
                .await
                .ok()?;
            let event_id = tail
                .and_then(|raw| serde_json::from_str::<WireMessage>(&raw).ok())
                .map(|message| message.event_id);
            oldest.push((job_type, event_id));
        }
        Some(oldest)
    }
}
