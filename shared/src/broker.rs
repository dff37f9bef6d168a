//! Redis as a wake-up channel (DESIGN §4, §6): key names, the wire message, and
//! connections. Redis holds no authoritative state; every message only carries ids.

use deadpool_redis::redis;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::config::RedisSettings;

/// Version of the message format; a worker drops messages of another version.
pub const MESSAGE_VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("redis command failed: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("no redis connection available: {0}")]
    Pool(#[from] deadpool_redis::PoolError),
    #[error("failed to build the redis pool: {0}")]
    Build(String),
}

/// The list a job type's messages go to: `{namespace}:q:<job_type>`. Every key shares
/// the `{namespace}` hash tag so multi-key commands (BLMPOP over several lists) work on a
/// Redis Cluster.
pub fn queue_key(namespace: &str, job_type: &str) -> String {
    format!("{{{namespace}}}:q:{job_type}")
}

/// What the outbox stores for an event (immutable once written).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventMessage {
    pub v: u32,
    pub event_id: Uuid,
    pub job_id: Uuid,
    pub tenant_id: Uuid,
    pub job_type: String,
    /// The request that started the job, so one upload can be followed from the API
    /// through the dispatcher to the worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl EventMessage {
    pub fn new(event_id: Uuid, job_id: Uuid, tenant_id: Uuid, job_type: &str) -> Self {
        Self {
            v: MESSAGE_VERSION,
            event_id,
            job_id,
            tenant_id,
            job_type: job_type.to_owned(),
            request_id: None,
        }
    }
}

/// What goes over Redis: the stored message plus this publication's task id and time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireMessage {
    pub v: u32,
    pub event_id: Uuid,
    pub job_id: Uuid,
    pub tenant_id: Uuid,
    pub job_type: String,
    pub task_id: Uuid,
    #[serde(with = "time::serde::rfc3339")]
    pub published_at: OffsetDateTime,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl WireMessage {
    pub fn publish(event: EventMessage, task_id: Uuid, published_at: OffsetDateTime) -> Self {
        Self {
            v: event.v,
            event_id: event.event_id,
            job_id: event.job_id,
            tenant_id: event.tenant_id,
            job_type: event.job_type,
            task_id,
            published_at,
            request_id: event.request_id,
        }
    }
}

pub use crate::redis_client::{
    BlockingConnection, RedisConnection, RedisPool, blocking_connection,
};

/// A pool for short commands (pushes, lengths, pings), single server or cluster.
pub fn build_pool(settings: &RedisSettings) -> Result<RedisPool, BrokerError> {
    RedisPool::build(settings)
}

/// Redis must never evict a queued message to make room; warn when it might.
pub async fn warn_unless_noeviction(pool: &RedisPool) {
    let policy: Result<Vec<String>, BrokerError> = async {
        let mut conn = pool.get().await?;
        Ok(redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory-policy")
            .query_async(&mut conn)
            .await?)
    }
    .await;
    match policy {
        Ok(pair) if pair.get(1).map(String::as_str) == Some("noeviction") => {}
        Ok(pair) => tracing::warn!(
            policy = pair.get(1).map(String::as_str).unwrap_or("unknown"),
            "redis maxmemory-policy is not noeviction: queued messages may be evicted (the outbox recovers them, late)"
        ),
        Err(error) => tracing::warn!(%error, "could not read redis maxmemory-policy"),
    }
}

/// The length of each job type's list (LLEN, pipelined).
pub async fn queue_lengths(
    pool: &RedisPool,
    namespace: &str,
    job_types: &[&str],
) -> Result<Vec<(String, i64)>, BrokerError> {
    let mut conn = pool.get().await?;
    let mut pipe = redis::pipe();
    for job_type in job_types {
        pipe.cmd("LLEN").arg(queue_key(namespace, job_type));
    }
    let lengths: Vec<i64> = pipe.query_async(&mut conn).await?;
    Ok(job_types
        .iter()
        .map(|job_type| (*job_type).to_owned())
        .zip(lengths)
        .collect())
}

/// Checks that Redis answers.
pub async fn ping(pool: &RedisPool) -> Result<(), BrokerError> {
    let mut conn = pool.get().await?;
    let _: String = redis::cmd("PING").query_async(&mut conn).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_keys_share_one_hash_tag() {
        assert_eq!(
            queue_key("quire", "analyze-document"),
            "{quire}:q:analyze-document"
        );
    }

    #[test]
    fn wire_message_serializes_rfc3339_and_keeps_ids() {
        let event = EventMessage::new(
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
            "analyze-document",
        );
        let at = time::macros::datetime!(2026-11-30 10:00:00 UTC);
        let wire = WireMessage::publish(event.clone(), Uuid::nil(), at);
        let json = serde_json::to_value(&wire).expect("serialize");
        assert_eq!(json["published_at"], "2026-11-30T10:00:00Z");
        assert_eq!(json["event_id"], event.event_id.to_string());
        let back: WireMessage = serde_json::from_value(json).expect("deserialize");
        assert_eq!(back, wire);
    }
}
