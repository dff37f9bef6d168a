//! The actions on a document's versions: upload a new one (analyzed, and made current by
//! its analysis's success), list them. The bytes arrive as any upload's do
//! (`StoredUpload`, the same checks and limits); what is written is decided here.

use diesel_async::{AsyncConnection, AsyncPgConnection};
use uuid::Uuid;

use super::ActionError;
use super::documents::{DocumentCaller, StoredUpload, discard, hold, refuse_duplicate};
use crate::db::documents::{self, Document, DocumentVersion};
use crate::db::jobs::{self, Job, NewJob};
use crate::db::versions::{self, NewVersion};
use crate::jobs::AnalyzeDocument;
use crate::storage::ObjectStore;

/// A new version as recorded, and the analysis that will make it current.
#[derive(Debug)]
pub struct RecordedVersion {
    pub version: DocumentVersion,
    pub job: Job,
}

fn trashed() -> ActionError {
    ActionError::conflict(
        "document_trashed",
        "the document is in the trash; restore it before adding a version",
    )
}

/// Records stored bytes as the next version of a live document of the caller's tenant,
/// `PENDING`, with its `analyze-document` job and outbox event, in one transaction that
/// holds the tenant (and, with `reject_duplicates`, the upload's duplicate rule). The
/// document's current version stays current — and searchable — until the new one's
/// analysis succeeds. A trashed document answers `document_trashed` (409). When nothing
/// is recorded the object is removed at once: nothing points at it.
pub async fn upload(
    conn: &mut AsyncPgConnection,
    store: &dyn ObjectStore,
    caller: &DocumentCaller,
    document_id: Uuid,
    stored: StoredUpload,
    reject_duplicates: bool,
) -> Result<RecordedVersion, ActionError> {
    let recorded = record(conn, caller, document_id, &stored, reject_duplicates).await;
    match &recorded {
        Ok(recorded) => tracing::info!(
            %document_id,
            version_id = %recorded.version.id,
            number = recorded.version.number,
            job_id = %recorded.job.id,
            tenant_id = %caller.tenant_id,
            user_id = %caller.user_id,
            size_bytes = stored.digest.size_bytes,
            "document version uploaded"
        ),
        Err(_) => discard(store, &stored.key).await,
    }
    recorded
}

async fn record(
    conn: &mut AsyncPgConnection,
    caller: &DocumentCaller,
    document_id: Uuid,
    stored: &StoredUpload,
    reject_duplicates: bool,
) -> Result<RecordedVersion, ActionError> {
    let tenant_id = caller.tenant_id;
    let new = NewVersion {
        id: stored.version_id,
        document_id,
        tenant_id,
        storage_key: stored.key.as_str().to_owned(),
        size_bytes: i64::try_from(stored.digest.size_bytes).unwrap_or(i64::MAX),
        sha256: stored.digest.sha256.clone(),
        content_type: stored.content_type.clone(),
        original_filename: stored.original_filename.clone(),
    };
    conn.transaction::<_, ActionError, _>(async |conn| {
        hold(conn, &caller.tenant_write()).await?;
        let document = documents::find_document_including_trashed(conn, tenant_id, document_id)
            .await?
            .ok_or(ActionError::NotFound)?;
        if document.trashed_at.is_some() {
            return Err(trashed());
        }
        if reject_duplicates {
            refuse_duplicate(conn, tenant_id, &new.sha256).await?;
        }
        // Trashed since the read above: the guarded statement finds no live document.
        let version = versions::record(conn, &new).await?.ok_or_else(trashed)?;
        let analyze = NewJob::new(
            tenant_id,
            AnalyzeDocument {
                document_id,
                document_version_id: version.id,
                force: false,
            },
            caller.configured_attempts,
            caller.request_id.clone(),
        );
        // A brand-new version has no active analysis: this is its own job.
        let job = jobs::enqueue_or_active(conn, &analyze)
            .await?
            .ok_or(ActionError::NotFound)?;
        Ok(RecordedVersion { version, job })
    })
    .await
}

/// A page of the versions of a live document of this tenant, newest first (numbered below
/// `before` when given), with the document (its `current_version_id` says which is
/// current).
pub async fn list(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
    before: Option<i32>,
    limit: i64,
) -> Result<(Document, Vec<DocumentVersion>), ActionError> {
    let document = documents::find_document(conn, tenant_id, document_id)
        .await?
        .ok_or(ActionError::NotFound)?;
    let listed = versions::list(conn, tenant_id, document_id, before, limit).await?;
    Ok((document, listed))
}
