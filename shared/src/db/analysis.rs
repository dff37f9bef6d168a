//! The analyze pipeline's writes to its document. Each is fenced by the job's claim
//! (status `RUNNING`, worker, attempt) inside the statement itself, so a worker that lost
//! its job writes nothing; the final `READY` commits with the job's `SUCCEEDED`.

use diesel::sql_types::{Date, Int4, Nullable, Text, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::DbError;
use super::jobs::Fence;

/// `PENDING | READY | FAILED → PROCESSING` as the pipeline starts (a re-analysis of a
/// ready document included). False when the fence no longer holds or the document is
/// gone or trashed.
pub async fn start_processing(
    conn: &mut AsyncPgConnection,
    fence: &Fence,
    tenant_id: Uuid,
    document_id: Uuid,
) -> Result<bool, DbError> {
    let updated = diesel::sql_query(
        "UPDATE documents SET status = 'PROCESSING', processing_error = NULL, updated_at = now() \
         WHERE id = $1 AND tenant_id = $2 AND trashed_at IS NULL \
           AND EXISTS (SELECT 1 FROM processing_jobs j \
                       WHERE j.id = $3 AND j.status = 'RUNNING' AND j.worker_id = $4 \
                         AND j.attempts = $5 AND j.last_task_id = $6)",
    )
    .bind::<SqlUuid, _>(document_id)
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(fence.job_id)
    .bind::<Text, _>(&fence.worker_id)
    .bind::<Int4, _>(fence.attempt)
    .bind::<SqlUuid, _>(fence.task_id)
    .execute(conn)
    .await?;
    Ok(updated == 1)
}

/// What the pipeline found in one version.
#[derive(Debug, Clone)]
pub struct Findings<'a> {
    pub version_id: Uuid,
    pub text: &'a str,
    pub issued_at: Option<time::Date>,
}

/// Stores the extracted text and the detected date (never over a date the user set; a
/// run that finds no date keeps the one there is) and reindexes the document — only for
/// the version the job analyzed, and only while the fence holds.
pub async fn record_findings(
    conn: &mut AsyncPgConnection,
    fence: &Fence,
    tenant_id: Uuid,
    document_id: Uuid,
    findings: &Findings<'_>,
) -> Result<bool, DbError> {
    let updated = diesel::sql_query(
        "UPDATE documents SET content_text = $3, \
             issued_at = CASE WHEN issued_at_set_by_user THEN issued_at \
                              ELSE coalesce($4, issued_at) END, \
             updated_at = now() \
         WHERE id = $1 AND tenant_id = $2 AND current_version_id = $5 \
           AND EXISTS (SELECT 1 FROM processing_jobs j \
                       WHERE j.id = $6 AND j.status = 'RUNNING' AND j.worker_id = $7 \
                         AND j.attempts = $8 AND j.last_task_id = $9)",
    )
    .bind::<SqlUuid, _>(document_id)
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<Text, _>(findings.text)
    .bind::<Nullable<Date>, _>(findings.issued_at)
    .bind::<SqlUuid, _>(findings.version_id)
    .bind::<SqlUuid, _>(fence.job_id)
    .bind::<Text, _>(&fence.worker_id)
    .bind::<Int4, _>(fence.attempt)
    .bind::<SqlUuid, _>(fence.task_id)
    .execute(conn)
    .await?;
    if updated == 1 {
        reindex(conn, document_id).await?;
    }
    Ok(updated == 1)
}

/// Recomputes the document's search vector (title, tags, correspondent, text); call in
/// the transaction that changed any of them.
pub async fn reindex(conn: &mut AsyncPgConnection, document_id: Uuid) -> Result<(), DbError> {
    diesel::sql_query("SELECT quire_reindex_document($1)")
        .bind::<SqlUuid, _>(document_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// `PROCESSING → READY` for the analyzed version; call in the job's success transaction.
pub async fn mark_ready(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
    version_id: Uuid,
) -> Result<bool, DbError> {
    let updated = diesel::sql_query(
        "UPDATE documents SET status = 'READY', processing_error = NULL, updated_at = now() \
         WHERE id = $1 AND tenant_id = $2 AND current_version_id = $3 AND status = 'PROCESSING'",
    )
    .bind::<SqlUuid, _>(document_id)
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(version_id)
    .execute(conn)
    .await?;
    Ok(updated == 1)
}
