//! The analyze pipeline's writes to its document and the version it analyzes. Each is
//! fenced by the job's claim (status `RUNNING`, worker, attempt) inside the statement
//! itself, so a worker that lost its job writes nothing; what the analysis found reaches
//! the document — and a new version becomes current — with the job's `SUCCEEDED`.

use diesel::sql_types::{Date, Int4, Int8, Nullable, Text, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::DbError;
use super::jobs::Fence;

/// The CTEs `failed_version` and `document` that fail what a failed job worked on, from a
/// CTE (`$job`, columns `tenant_id, document_id, payload`): the version its payload's
/// `document_version_id` names, and the document only while that version is its current
/// one (or the payload names none). `$message` is the safe message's parameter, `$when`
/// a condition on the job row (which types fail their document). A macro so that each
/// statement stays one constant string.
macro_rules! failed_analysis_ctes {
    ($job:literal, $message:literal, $when:literal) => {
        concat!(
            "failed_version AS ( \
                 UPDATE document_versions AS v SET status = 'FAILED', processing_error = ",
            $message,
            " \
                 FROM ",
            $job,
            " WHERE v.document_id = ",
            $job,
            ".document_id \
                   AND v.tenant_id = ",
            $job,
            ".tenant_id \
                   AND v.id::text = ",
            $job,
            ".payload ->> 'document_version_id' AND ",
            $when,
            " \
                 RETURNING v.id), \
             document AS ( \
                 UPDATE documents AS d \
                 SET status = 'FAILED', processing_error = ",
            $message,
            ", updated_at = now() \
                 FROM ",
            $job,
            " WHERE d.id = ",
            $job,
            ".document_id \
                   AND d.tenant_id = ",
            $job,
            ".tenant_id AND ",
            $when,
            " \
                   AND (",
            $job,
            ".payload ->> 'document_version_id' IS NULL \
                        OR d.current_version_id::text = ",
            $job,
            ".payload ->> 'document_version_id') \
                 RETURNING d.id)"
        )
    };
}
pub(crate) use failed_analysis_ctes;

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = Int8)]
    count: i64,
}

/// `PENDING | READY | FAILED → PROCESSING` for the analyzed version as the pipeline
/// starts (a re-analysis included), and for the document too while that version is its
/// current one: a new version's analysis leaves the document as ready as it was. False
/// when the fence no longer holds or the document is gone or trashed. The document row
/// is locked before the version's (`live`), the order of every writer of both.
pub async fn start_processing(
    conn: &mut AsyncPgConnection,
    fence: &Fence,
    tenant_id: Uuid,
    document_id: Uuid,
    version_id: Uuid,
) -> Result<bool, DbError> {
    let started = diesel::sql_query(
        "WITH fenced AS ( \
             SELECT 1 FROM processing_jobs j \
             WHERE j.id = $3 AND j.status IS NOT DISTINCT FROM 'RUNNING' AND j.worker_id = $4 \
               AND j.attempts = $5 AND j.last_task_id = $6), \
         live AS ( \
             SELECT id, current_version_id FROM documents \
             WHERE id = $1 AND tenant_id = $2 AND trashed_at IS NULL \
               AND EXISTS (SELECT 1 FROM fenced) \
             FOR UPDATE), \
         version AS ( \
             UPDATE document_versions SET status = 'PROCESSING', processing_error = NULL \
             WHERE id = $7 AND document_id = $1 AND tenant_id = $2 \
               AND EXISTS (SELECT 1 FROM live) \
             RETURNING id), \
         document AS ( \
             UPDATE documents SET status = 'PROCESSING', processing_error = NULL, updated_at = now() \
             WHERE id = $1 AND tenant_id = $2 AND trashed_at IS NULL AND current_version_id = $7 \
               AND EXISTS (SELECT 1 FROM fenced) \
             RETURNING id) \
         SELECT count(*) AS count FROM version",
    )
    .bind::<SqlUuid, _>(document_id)
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(fence.job_id)
    .bind::<Text, _>(&fence.worker_id)
    .bind::<Int4, _>(fence.attempt)
    .bind::<SqlUuid, _>(fence.task_id)
    .bind::<SqlUuid, _>(version_id)
    .get_result::<Count>(conn)
    .await?;
    Ok(started.count == 1)
}

/// What the pipeline found in one version.
#[derive(Debug, Clone)]
pub struct Findings<'a> {
    pub version_id: Uuid,
    pub text: &'a str,
    pub issued_at: Option<time::Date>,
}

/// Holds the extracted text and the detected date on the analyzed version until the
/// job's success transaction ([`make_current`]) — only while the fence holds. False when
/// the version is gone.
pub async fn record_findings(
    conn: &mut AsyncPgConnection,
    fence: &Fence,
    tenant_id: Uuid,
    document_id: Uuid,
    findings: &Findings<'_>,
) -> Result<bool, DbError> {
    let updated = diesel::sql_query(
        "UPDATE document_versions SET findings_text = $3, findings_issued_at = $4 \
         WHERE id = $5 AND document_id = $1 AND tenant_id = $2 \
           AND EXISTS (SELECT 1 FROM processing_jobs j \
                       WHERE j.id = $6 AND j.status IS NOT DISTINCT FROM 'RUNNING' AND j.worker_id = $7 \
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

#[derive(diesel::QueryableByName)]
struct Promoted {
    #[diesel(sql_type = Int8)]
    analyzed: i64,
    #[diesel(sql_type = Int8)]
    promoted: i64,
}

/// What the success of an analysis did to its document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The version is the document's current one now (it was, or it is newer than the one
    /// that was): the document is `READY` with its findings, reindexed.
    Current,
    /// The version is `READY`, but a newer one is current: the document is left alone.
    Superseded,
    /// The version or the document is gone or trashed: nothing was written.
    Gone,
}

/// The analyzed version `READY`, and — unless a newer version is current already — the
/// document's current version, `READY`, with the findings its analysis held (never over
/// a date the user set; a run that found no date keeps the one there is) and its search
/// vector recomputed. Call in the job's success transaction, after its fenced
/// `SUCCEEDED`. The document row is locked first, so two analyses finishing at once
/// compare numbers one after the other: an older version finishing last never becomes
/// current.
pub async fn make_current(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
    version_id: Uuid,
) -> Result<Outcome, DbError> {
    let locked = super::documents::lock_document(conn, tenant_id, document_id).await?;
    if locked.is_none_or(|document| document.trashed_at.is_some()) {
        return Ok(Outcome::Gone);
    }
    // `old` is the version row as it was before this statement: its findings, cleared here.
    let row = diesel::sql_query(
        "WITH v AS ( \
             UPDATE document_versions AS dv \
             SET status = 'READY', processing_error = NULL, \
                 findings_text = NULL, findings_issued_at = NULL \
             FROM document_versions AS old \
             WHERE dv.id = $3 AND dv.document_id = $1 AND dv.tenant_id = $2 AND old.id = dv.id \
             RETURNING dv.id, dv.number, old.findings_text, old.findings_issued_at), \
         promoted AS ( \
             UPDATE documents AS d \
             SET current_version_id = v.id, \
                 content_text = coalesce(v.findings_text, \
                     CASE WHEN d.current_version_id = v.id THEN d.content_text END), \
                 issued_at = CASE WHEN d.issued_at_set_by_user THEN d.issued_at \
                                  ELSE coalesce(v.findings_issued_at, d.issued_at) END, \
                 status = 'READY', processing_error = NULL, updated_at = now() \
             FROM v \
             WHERE d.id = $1 AND d.tenant_id = $2 AND d.trashed_at IS NULL \
               AND (d.current_version_id = v.id \
                    OR v.number > (SELECT c.number FROM document_versions AS c \
                                   WHERE c.id = d.current_version_id)) \
             RETURNING d.id) \
         SELECT (SELECT count(*) FROM v) AS analyzed, (SELECT count(*) FROM promoted) AS promoted",
    )
    .bind::<SqlUuid, _>(document_id)
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(version_id)
    .get_result::<Promoted>(conn)
    .await?;
    if row.promoted == 1 {
        reindex(conn, document_id).await?;
        return Ok(Outcome::Current);
    }
    Ok(if row.analyzed == 1 {
        Outcome::Superseded
    } else {
        Outcome::Gone
    })
}
