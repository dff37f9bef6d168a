//! A tenant's event log (`tenant_events`): what happened to its documents and jobs,
//! recorded in the transaction that made it happen, so an event is never lost and never
//! exists for a change that rolled back. Webhook deliveries and `GET /api/events` both
//! read from here.

use diesel::prelude::*;
use diesel::sql_types::{Int8, Jsonb, Text, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use uuid::Uuid;

use super::DbError;
use super::schema::tenant_events;

/// The NOTIFY channel `record` signals (payload: the tenant id), so a stream wakes up
/// when its tenant has something new instead of polling.
pub const TENANT_EVENTS_CHANNEL: &str = "quire_tenant_events";

/// The kinds of event a tenant can subscribe to (the table's CHECK lists the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TenantEventType {
    #[serde(rename = "document.ready")]
    DocumentReady,
    #[serde(rename = "document.failed")]
    DocumentFailed,
    #[serde(rename = "document.trashed")]
    DocumentTrashed,
    #[serde(rename = "document.purged")]
    DocumentPurged,
    #[serde(rename = "job.failed")]
    JobFailed,
}

impl TenantEventType {
    pub const ALL: [TenantEventType; 5] = [
        TenantEventType::DocumentReady,
        TenantEventType::DocumentFailed,
        TenantEventType::DocumentTrashed,
        TenantEventType::DocumentPurged,
        TenantEventType::JobFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TenantEventType::DocumentReady => "document.ready",
            TenantEventType::DocumentFailed => "document.failed",
            TenantEventType::DocumentTrashed => "document.trashed",
            TenantEventType::DocumentPurged => "document.purged",
            TenantEventType::JobFailed => "job.failed",
        }
    }

    pub fn parse(name: &str) -> Option<TenantEventType> {
        TenantEventType::ALL
            .into_iter()
            .find(|t| t.as_str() == name)
    }
}

/// An event to record. `subject_id` is the document (or, for `job.failed`, the job).
#[derive(Debug, Clone)]
pub struct NewTenantEvent {
    pub tenant_id: Uuid,
    pub event_type: TenantEventType,
    pub subject_id: Uuid,
    pub payload: serde_json::Value,
}

/// A recorded event.
#[derive(Debug, Clone, PartialEq, Queryable, Selectable, QueryableByName)]
#[diesel(table_name = tenant_events, check_for_backend(diesel::pg::Pg))]
pub struct TenantEvent {
    pub id: i64,
    pub tenant_id: Uuid,
    pub event_type: String,
    pub subject_id: Uuid,
    pub payload: serde_json::Value,
    pub txid: i64,
    pub created_at: OffsetDateTime,
}

/// Where a reader of one tenant's log stands: the last event it has seen, in the
/// log's (txid, id) order. `EventCursor::START` is before every event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EventCursor {
    pub txid: i64,
    pub id: i64,
}

impl EventCursor {
    pub const START: EventCursor = EventCursor { txid: 0, id: 0 };

    pub fn of(event: &TenantEvent) -> EventCursor {
        EventCursor {
            txid: event.txid,
            id: event.id,
        }
    }
}

/// Records `event` in the caller's transaction and signals
/// [`TENANT_EVENTS_CHANNEL`] (delivered only if the transaction commits). Returns the
/// event's id.
pub async fn record(conn: &mut AsyncPgConnection, event: &NewTenantEvent) -> Result<i64, DbError> {
    #[derive(QueryableByName)]
    struct Id {
        #[diesel(sql_type = Int8)]
        id: i64,
    }
    let row: Id = diesel::sql_query(
        "WITH inserted AS ( \
             INSERT INTO tenant_events (tenant_id, event_type, subject_id, payload) \
             VALUES ($1, $2, $3, $4) RETURNING id \
         ) \
         SELECT inserted.id FROM inserted CROSS JOIN pg_notify($5, $1::text) AS n",
    )
    .bind::<SqlUuid, _>(event.tenant_id)
    .bind::<Text, _>(event.event_type.as_str())
    .bind::<SqlUuid, _>(event.subject_id)
    .bind::<Jsonb, _>(&event.payload)
    .bind::<Text, _>(TENANT_EVENTS_CHANNEL)
    .get_result(conn)
    .await?;
    Ok(row.id)
}

/// Up to `limit` of the tenant's events after `cursor`, oldest first, and only those
/// whose transaction is older than every transaction still open: a later call can then
/// never find an event that sorts before one this call returned, so a reader that
/// resumes from the last event it saw misses nothing.
pub async fn list_after(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    cursor: EventCursor,
    limit: i64,
) -> Result<Vec<TenantEvent>, DbError> {
    let events = diesel::sql_query(
        "SELECT id, tenant_id, event_type, subject_id, payload, txid, created_at \
         FROM tenant_events \
         WHERE tenant_id = $1 AND (txid, id) > ($2, $3) \
           AND txid < pg_snapshot_xmin(pg_current_snapshot())::text::bigint \
         ORDER BY txid, id LIMIT $4",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<Int8, _>(cursor.txid)
    .bind::<Int8, _>(cursor.id)
    .bind::<Int8, _>(limit)
    .load(conn)
    .await?;
    Ok(events)
}
