//! The state changes a tenant hears of (`document.ready`, `document.failed`,
//! `document.trashed`, `document.purged`, `job.failed`), each announced ONCE here: its
//! event is recorded in the tenant's log (`db::tenant_events::record`) and fanned out to
//! the tenant's webhook subscriptions (`db::webhooks::fan_out`), both in the caller's
//! transaction — the one that makes the change. An event is never lost and never exists
//! for a change that rolled back.
//!
//! Payloads are small: ids, types, codes and timestamps; never content, storage keys,
//! payloads or anything else internal.

use diesel_async::AsyncPgConnection;
use serde_json::json;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use uuid::Uuid;

use crate::db::tenant_events::{self, NewTenantEvent, TenantEventType};
use crate::db::{DbError, webhooks};
use crate::jobs::{BackgroundJob, DeliverWebhook};

/// Records the event and enqueues its webhook deliveries; returns the event's id.
async fn announce(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    event_type: TenantEventType,
    subject_id: Uuid,
    payload: serde_json::Value,
) -> Result<i64, DbError> {
    let event = NewTenantEvent {
        tenant_id,
        event_type,
        subject_id,
        payload,
    };
    let event_id = tenant_events::record(conn, &event).await?;
    webhooks::fan_out(conn, tenant_id, event_id, event_type).await?;
    Ok(event_id)
}

/// The analysis of `version_id` completed: the document is `READY`.
pub async fn document_ready(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
    version_id: Uuid,
    job_id: Uuid,
) -> Result<i64, DbError> {
    let payload = json!({
        "document_id": document_id,
        "document_version_id": version_id,
        "job_id": job_id,
        "status": "READY",
    });
    announce(
        conn,
        tenant_id,
        TenantEventType::DocumentReady,
        document_id,
        payload,
    )
    .await
}

/// The document's processing failed for good: it is `FAILED` with `error_code`.
pub async fn document_failed(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
    job_id: Uuid,
    error_code: &str,
) -> Result<i64, DbError> {
    let payload = json!({
        "document_id": document_id,
        "job_id": job_id,
        "status": "FAILED",
        "error_code": error_code,
    });
    announce(
        conn,
        tenant_id,
        TenantEventType::DocumentFailed,
        document_id,
        payload,
    )
    .await
}

/// The document went to the trash.
pub async fn document_trashed(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
    trashed_at: Option<OffsetDateTime>,
) -> Result<i64, DbError> {
    let payload = json!({
        "document_id": document_id,
        "trashed_at": trashed_at.and_then(|at| at.format(&Rfc3339).ok()),
    });
    announce(
        conn,
        tenant_id,
        TenantEventType::DocumentTrashed,
        document_id,
        payload,
    )
    .await
}

/// The document was purged for good (every version and asset removed).
pub async fn document_purged(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
    job_id: Uuid,
) -> Result<i64, DbError> {
    let payload = json!({ "document_id": document_id, "job_id": job_id });
    announce(
        conn,
        tenant_id,
        TenantEventType::DocumentPurged,
        document_id,
        payload,
    )
    .await
}

/// A job ended `FAILED` for good. Not announced for a `deliver-webhook` job: its failure
/// is the delivery history's, and announcing it would fan out another delivery to the
/// receiver that just failed, without end. `None` then.
pub async fn job_failed(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    job_id: Uuid,
    job_type: &str,
    document_id: Option<Uuid>,
    error_code: &str,
) -> Result<Option<i64>, DbError> {
    if job_type == DeliverWebhook::JOB_TYPE {
        return Ok(None);
    }
    let payload = json!({
        "job_id": job_id,
        "job_type": job_type,
        "document_id": document_id,
        "status": "FAILED",
        "error_code": error_code,
    });
    announce(conn, tenant_id, TenantEventType::JobFailed, job_id, payload)
        .await
        .map(Some)
}
