//! The actions on a tenant's documents that move their lifecycle: delete (to the trash,
//! or purge from it), restore, and the bulk re-analyze and verify. Upload and edit are
//! one statement or transaction each in `db::intake` and `db::documents`, called by
//! their routes.

use diesel_async::{AsyncConnection, AsyncPgConnection};
use uuid::Uuid;

use super::ActionError;
use crate::db::documents::{self, Document};
use crate::db::jobs::{self, Job, NewJob};
use crate::jobs::{AnalyzeDocument, BackgroundJob, PurgeDocument, VerifyDocument};

/// Who acts on the documents: the tenant, and what every job they enqueue carries.
#[derive(Debug, Clone)]
pub struct DocumentCaller {
    pub tenant_id: Uuid,
    /// `jobs.max_attempts`.
    pub configured_attempts: i32,
    /// The request, carried in every message announcing the jobs.
    pub request_id: Option<String>,
}

/// What a delete did.
#[derive(Debug)]
pub enum Deleted {
    /// A live document went to the trash; this many unfinished jobs were cancelled.
    Trashed(Document, usize),
    /// A trashed document will be purged for good by this job (new, or the active one).
    PurgeQueued(Box<Job>),
}

/// A live document goes to the trash and its `QUEUED` / `RUNNING` jobs and their
/// undelivered events are cancelled, in one transaction. A document already in the
/// trash gets a `purge-document` job (an active purge is returned, not duplicated).
pub async fn delete(
    conn: &mut AsyncPgConnection,
    caller: &DocumentCaller,
    document_id: Uuid,
) -> Result<Deleted, ActionError> {
    let tenant_id = caller.tenant_id;
    let deleted = conn
        .transaction::<_, ActionError, _>(async |conn| {
            if let Some(document) = documents::trash_document(conn, tenant_id, document_id).await? {
                let cancelled = jobs::cancel_document_jobs(conn, tenant_id, document_id).await?;
                return Ok(Deleted::Trashed(document, cancelled));
            }
            documents::find_document_including_trashed(conn, tenant_id, document_id)
                .await?
                .ok_or(ActionError::NotFound)?;
            let purge = NewJob::new(
                tenant_id,
                PurgeDocument { document_id },
                caller.configured_attempts,
                caller.request_id.clone(),
            );
            let job = jobs::enqueue_or_active(conn, &purge)
                .await?
                .ok_or(ActionError::NotFound)?;
            Ok(Deleted::PurgeQueued(Box::new(job)))
        })
        .await?;
    match &deleted {
        Deleted::Trashed(_, cancelled) => {
            tracing::info!(%document_id, %tenant_id, cancelled_jobs = cancelled, "document trashed");
        }
        Deleted::PurgeQueued(job) => {
            tracing::info!(%document_id, %tenant_id, job_id = %job.id, "document purge queued");
        }
    }
    Ok(deleted)
}

/// Takes a document out of the trash and withdraws a purge that has not started (its
/// cancelled jobs stay cancelled). The row is locked: a running purge holds it until it
/// is done, and then there is nothing left to restore.
pub async fn restore(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
) -> Result<Document, ActionError> {
    let document = conn
        .transaction::<_, ActionError, _>(async |conn| {
            let current = documents::lock_document(conn, tenant_id, document_id)
                .await?
                .ok_or(ActionError::NotFound)?;
            if current.trashed_at.is_none() {
                return Err(ActionError::conflict(
                    "document_not_trashed",
                    "the document is not in the trash",
                ));
            }
            jobs::cancel_queued_document_jobs(
                conn,
                tenant_id,
                document_id,
                PurgeDocument::JOB_TYPE,
                "the document was restored",
            )
            .await?;
            documents::restore_document(conn, tenant_id, document_id)
                .await?
                .ok_or(ActionError::NotFound)
        })
        .await?;
    tracing::info!(%document_id, %tenant_id, "document restored");
    Ok(document)
}

/// Most document ids one bulk request may name.
pub const MAX_BULK_IDS: usize = 100;

/// One document's answer in a bulk request: its job (new or the active equivalent), or
/// `None` when the document is missing in the tenant.
pub type BulkResult = (Uuid, Option<Job>);

/// Analyzes each document's current version again (`force` re-runs every step).
pub async fn reanalyze(
    conn: &mut AsyncPgConnection,
    caller: &DocumentCaller,
    ids: &[Uuid],
    force: bool,
) -> Result<Vec<BulkResult>, ActionError> {
    enqueue_each(conn, caller, ids, |document_id, document_version_id| {
        AnalyzeDocument {
            document_id,
            document_version_id,
            force,
        }
    })
    .await
}

/// Checks each document's stored bytes against its recorded size and checksum.
pub async fn verify(
    conn: &mut AsyncPgConnection,
    caller: &DocumentCaller,
    ids: &[Uuid],
) -> Result<Vec<BulkResult>, ActionError> {
    enqueue_each(conn, caller, ids, |document_id, document_version_id| {
        VerifyDocument {
            document_id,
            document_version_id,
        }
    })
    .await
}

/// Enqueues, for each document of the caller's tenant, the job `job_for` builds from its
/// id and current version; a missing document is reported in its result, not as an error.
async fn enqueue_each<J: BackgroundJob>(
    conn: &mut AsyncPgConnection,
    caller: &DocumentCaller,
    ids: &[Uuid],
    job_for: impl Fn(Uuid, Uuid) -> J,
) -> Result<Vec<BulkResult>, ActionError> {
    if ids.is_empty() || ids.len() > MAX_BULK_IDS {
        return Err(ActionError::Invalid {
            code: "invalid_ids",
            detail: format!("send 1 to {MAX_BULK_IDS} document ids"),
        });
    }
    let mut results = Vec::with_capacity(ids.len());
    for &document_id in ids {
        let document = documents::find_document(conn, caller.tenant_id, document_id).await?;
        let Some(version_id) = document.and_then(|document| document.current_version_id) else {
            results.push((document_id, None));
            continue;
        };
        let job = NewJob::new(
            caller.tenant_id,
            job_for(document_id, version_id),
            caller.configured_attempts,
            caller.request_id.clone(),
        );
        results.push((document_id, jobs::enqueue_or_active(conn, &job).await?));
    }
    Ok(results)
}
