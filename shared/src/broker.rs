//! The Redis protocol (DESIGN §4, §6), all of it: the key of each list, the message
//! the outbox stores and the one that goes over Redis, and the three things anyone does
//! with a list — push, pop, read the oldest message. Redis holds no authoritative
//! state; every message only carries ids.
//!
//! Each list is FIFO: [`push`] adds at the head (`LPUSH`), [`pop`] takes from the tail
//! (`BLMPOP … RIGHT`), so the tail is always the oldest message and [`oldest_event_ids`]
//! reads it there (`LINDEX -1`). Lost-message recovery depends on that order (DESIGN
//! §5); nothing outside this file names a direction.
//!
//! The connections themselves (pools, the blocking connection, [`BrokerError`]) are in
//! `redis_client`.

use std::ops::Deref;
use std::time::Duration;

use deadpool_redis::redis;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::redis_client::{BlockingConnection, BrokerError, RedisPool};

/// Version of the message format; a worker drops messages of another version.
pub const MESSAGE_VERSION: u32 = 1;

/// The list a job type's messages go to: `{namespace}:q:<job_type>`. Every key shares
/// the `{namespace}` hash tag so multi-key commands (BLMPOP over several lists) work on a
/// Redis Cluster.
pub fn queue_key(namespace: &str, job_type: &str) -> String {
    format!("{{{namespace}}}:q:{job_type}")
}

/// What the outbox stores for an event (immutable once written). SQL writes the same
/// shape for the events that replace another one (`quire_event_message` in the
/// migrations); the dispatcher's `message_shape` test holds the two together.
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

/// What goes over Redis: the stored message, field for field, plus this publication's
/// task id and time. `published_at` is the database time of the claim that led to this
/// push (`claimed_at`), read before the push and never later than the event's own
/// `published_at`: lost-message recovery compares it with events' `published_at` on the
/// one clock both come from (DESIGN §5, docs/decisions.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireMessage {
    #[serde(flatten)]
    pub event: EventMessage,
    pub task_id: Uuid,
    #[serde(with = "time::serde::rfc3339")]
    pub published_at: OffsetDateTime,
}

impl WireMessage {
    pub fn publish(event: EventMessage, task_id: Uuid, published_at: OffsetDateTime) -> Self {
        Self {
            event,
            task_id,
            published_at,
        }
    }
}

/// A published message is its stored message plus a publication: read its ids as the
/// stored message's (`message.job_id`).
impl Deref for WireMessage {
    type Target = EventMessage;

    fn deref(&self) -> &EventMessage {
        &self.event
    }
}

/// Adds to `pipeline` the push of `message` (a serialized [`WireMessage`]) onto the
/// head of `list`, its answer ignored.
pub fn push(pipeline: &mut redis::Pipeline, list: &str, message: &str) {
    pipeline.lpush(list, message).ignore();
}

/// Pops up to `count` messages from the tail of the first of `lists` that has any,
/// oldest first, waiting at most `timeout` (to the millisecond) for one to arrive: that
/// list's name and its messages, `None` when every list stayed empty. Atomic: a message
/// is either returned or still in its list.
pub async fn pop(
    conn: &mut BlockingConnection,
    lists: &[String],
    timeout: Duration,
    count: usize,
) -> Result<Option<(String, Vec<String>)>, BrokerError> {
    let popped: Option<(String, Vec<String>)> = redis::cmd("BLMPOP")
        .arg(timeout.as_secs_f64())
        .arg(lists.len())
        .arg(lists)
        .arg("RIGHT")
        .arg("COUNT")
        .arg(count)
        .query_async(conn)
        .await?;
    Ok(popped)
}

/// The raw oldest message of each job type's list (its tail, `None` when empty), in the
/// order of `job_types`. One pipeline, so every list is read at the same moment: the one
/// read of a list's oldest message, which both views below interpret.
async fn tails(
    pool: &RedisPool,
    namespace: &str,
    job_types: &[&str],
) -> Result<Vec<(String, Option<String>)>, BrokerError> {
    let mut conn = pool.get().await?;
    let mut pipe = redis::pipe();
    for job_type in job_types {
        pipe.cmd("LINDEX")
            .arg(queue_key(namespace, job_type))
            .arg(-1);
    }
    let tails: Vec<Option<String>> = pipe.query_async(&mut conn).await?;
    Ok(job_types
        .iter()
        .map(|job_type| (*job_type).to_owned())
        .zip(tails)
        .collect())
}

/// The event id of the oldest message in each job type's list, in the order of
/// `job_types`: `None` for an empty list or a message that does not parse.
pub async fn oldest_event_ids(
    pool: &RedisPool,
    namespace: &str,
    job_types: &[&str],
) -> Result<Vec<(String, Option<Uuid>)>, BrokerError> {
    Ok(tails(pool, namespace, job_types)
        .await?
        .into_iter()
        .map(|(job_type, tail)| {
            let event_id = tail
                .and_then(|raw| serde_json::from_str::<WireMessage>(&raw).ok())
                .map(|message| message.event.event_id);
            (job_type, event_id)
        })
        .collect())
}

/// The oldest message of a list, as lost-message recovery reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// The list is empty.
    Empty,
    /// The oldest message was pushed at this time (its `published_at`).
    Pushed(OffsetDateTime),
    /// The oldest message does not parse as a [`WireMessage`]: nobody can tell when it
    /// was pushed, so nobody can tell which messages before it were lost.
    Unknown,
}

/// The oldest message of each job type's list, in the order of `job_types`, as
/// lost-message recovery reads it.
pub async fn oldest_pushed_at(
    pool: &RedisPool,
    namespace: &str,
    job_types: &[&str],
) -> Result<Vec<(String, Tail)>, BrokerError> {
    Ok(tails(pool, namespace, job_types)
        .await?
        .into_iter()
        .map(|(job_type, tail)| {
            let tail = match tail {
                None => Tail::Empty,
                Some(raw) => serde_json::from_str::<WireMessage>(&raw)
                    .map_or(Tail::Unknown, |message| Tail::Pushed(message.published_at)),
            };
            (job_type, tail)
        })
        .collect())
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

    #[test]
    fn a_wire_message_is_the_stored_message_plus_its_publication() {
        let mut event = EventMessage::new(
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
            "verify-document",
        );
        event.request_id = Some("req-1".to_owned());
        let at = time::macros::datetime!(2026-11-30 10:00:00 UTC);
        let task_id = Uuid::now_v7();
        let mut wire = serde_json::to_value(WireMessage::publish(event.clone(), task_id, at))
            .expect("serialize");
        let object = wire.as_object_mut().expect("an object");
        assert_eq!(
            object.remove("task_id"),
            Some(serde_json::json!(task_id.to_string()))
        );
        assert!(object.remove("published_at").is_some());
        assert_eq!(wire, serde_json::to_value(&event).expect("serialize"));
    }
}
