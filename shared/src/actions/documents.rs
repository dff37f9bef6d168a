//! The actions on a tenant's documents: upload (record stored bytes as a new
//! document), edit, delete (to the trash, or purge from it), restore, and the bulk
//! re-analyze and verify. Decoding a request (multipart, JSON) is the caller's; what is
//! written, checked and enqueued is decided here.

use diesel_async::{AsyncConnection, AsyncPgConnection};
use uuid::Uuid;

use super::{ActionError, hold_tenant};
use crate::db::documents::{self, Document, DocumentEdit, DocumentVersion, IfMatch, NewDocument};
use crate::db::intake::{self, ExpressClaim, NewIntake, NotRecorded, Recorded};
use crate::db::jobs::{self, Job, NewJob, Priority};
use crate::db::labels::{self, Labels};
use crate::db::tenants::{TenantLock, TenantWrite};
use crate::db::{DbError, analysis};
use crate::jobs::{AnalyzeDocument, BackgroundJob, PurgeDocument, VerifyDocument};
use crate::states::TenantStatus;
use crate::storage::{Digested, ObjectStore, StorageKey};

/// Longest title, in characters (uploads cut a longer filename to it).
pub const MAX_TITLE_CHARS: usize = 500;

/// Why a client's title was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TitleFault {
    Empty,
    TooLong,
    /// Control or bidirectional-control characters: they would let a title rewrite
    /// what a reader sees (reversed text, forged line breaks or snippet marks).
    Unprintable,
}

/// A title as a client sent it (upload or edit), trimmed, or why it is refused: one
/// rule for every way a title gets in. The length limit counts what was sent, spaces
/// around it included, as the OpenAPI document's `maxLength` does.
pub fn checked_title(raw: &str) -> Result<String, TitleFault> {
    let title = raw.trim();
    if title.is_empty() {
        return Err(TitleFault::Empty);
    }
    if raw.chars().count() > MAX_TITLE_CHARS {
        return Err(TitleFault::TooLong);
    }
    if title.chars().any(|c| c.is_control() || is_bidi_control(c)) {
        return Err(TitleFault::Unprintable);
    }
    Ok(title.to_owned())
}

/// The Unicode characters that reorder or isolate text (Trojan Source's tools).
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{061C}')
}

/// Who acts on the documents: the tenant, and what every job they enqueue carries.
#[derive(Debug, Clone)]
pub struct DocumentCaller {
    pub tenant_id: Uuid,
    /// The tenant's generation when the caller was let in (see `TenantWrite`).
    pub tenant_generation: i64,
    /// The member acting, for the log.
    pub user_id: Uuid,
    /// `jobs.max_attempts`.
    pub configured_attempts: i32,
    /// The request, carried in every message announcing the jobs.
    pub request_id: Option<String>,
}

impl DocumentCaller {
    /// The tenant every write of this caller is for.
    pub fn tenant_write(&self) -> TenantWrite {
        TenantWrite {
            tenant_id: self.tenant_id,
            generation: Some(self.tenant_generation),
        }
    }
}

/// Holds the caller's tenant for a write in this transaction (see `hold_tenant`).
pub(crate) async fn hold(
    conn: &mut AsyncPgConnection,
    tenant: &TenantWrite,
) -> Result<(), ActionError> {
    hold_tenant(conn, tenant, TenantStatus::Active, TenantLock::Share).await
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
    delete_if(conn, caller, document_id, &IfMatch::Any).await
}

/// `delete` of a document at a version `if_match` admits (`If-Match`), else
/// `VersionMismatch` and nothing changes: the trash's UPDATE carries the guard; a trashed
/// document's version is compared on its locked row before its purge is queued.
pub async fn delete_if(
    conn: &mut AsyncPgConnection,
    caller: &DocumentCaller,
    document_id: Uuid,
    if_match: &IfMatch,
) -> Result<Deleted, ActionError> {
    let tenant_id = caller.tenant_id;
    let deleted = conn
        .transaction::<_, ActionError, _>(async |conn| {
            hold(conn, &caller.tenant_write()).await?;
            // Job rows before the document row: the lock order of every finish and cancel.
            jobs::lock_document_jobs(conn, tenant_id, document_id).await?;
            if let Some(document) =
                documents::trash_document(conn, tenant_id, document_id, if_match).await?
            {
                let cancelled = jobs::cancel_document_jobs(conn, tenant_id, document_id).await?;
                // A version whose analysis was just cancelled does not stay `PENDING`
                // for ever (the trashed document itself keeps its status).
                let owners = crate::jobs::document_status_owners();
                documents::settle_after_cancel(conn, tenant_id, document_id, &owners).await?;
                crate::events::document_trashed(conn, tenant_id, document_id, document.trashed_at)
                    .await?;
                return Ok(Deleted::Trashed(document, cancelled));
            }
            let current = if *if_match == IfMatch::Any {
                documents::find_document_including_trashed(conn, tenant_id, document_id).await?
            } else {
                // Locked: the version compared is the one the purge is queued for.
                documents::lock_document(conn, tenant_id, document_id).await?
            };
            let current = current.ok_or(ActionError::NotFound)?;
            // Live and not trashed by the guarded UPDATE, or trashed at another version.
            if current.trashed_at.is_none() || !if_match.admits(current.row_version) {
                return Err(ActionError::VersionMismatch);
            }
            let job = queue_purge(
                conn,
                tenant_id,
                document_id,
                caller.configured_attempts,
                caller.request_id.clone(),
            )
            .await?
            .ok_or(ActionError::NotFound)?;
            Ok(Deleted::PurgeQueued(Box::new(job)))
        })
        .await?;
    match &deleted {
        Deleted::Trashed(_, cancelled) => {
            tracing::info!(%document_id, %tenant_id, user_id = %caller.user_id, cancelled_jobs = cancelled, "document trashed");
        }
        Deleted::PurgeQueued(job) => {
            tracing::info!(%document_id, %tenant_id, job_id = %job.id, "document purge queued");
        }
    }
    Ok(deleted)
}

/// The one way a purge is queued, for a document the caller found in the trash (a
/// DELETE of a trashed document, the trash-emptying schedule): a `purge-document` job,
/// or the active one (the partial unique index keeps one per document). Call inside the
/// caller's transaction, after `hold_tenant`.
pub(crate) async fn queue_purge(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    document_id: Uuid,
    configured_attempts: i32,
    request_id: Option<String>,
) -> Result<Option<Job>, DbError> {
    let purge = NewJob::new(
        tenant_id,
        PurgeDocument { document_id },
        configured_attempts,
        request_id,
    );
    jobs::enqueue_or_active(conn, &purge).await
}

/// Takes a document out of the trash and withdraws a purge that has not started (its
/// cancelled jobs stay cancelled). The row is locked: a running purge holds it until it
/// is done, and then there is nothing left to restore.
pub async fn restore(
    conn: &mut AsyncPgConnection,
    tenant: &TenantWrite,
    document_id: Uuid,
) -> Result<Document, ActionError> {
    restore_if(conn, tenant, document_id, &IfMatch::Any).await
}

/// `restore` of a document at a version `if_match` admits (`If-Match`), else
/// `VersionMismatch` (before any other refusal) and nothing changes.
pub async fn restore_if(
    conn: &mut AsyncPgConnection,
    tenant: &TenantWrite,
    document_id: Uuid,
    if_match: &IfMatch,
) -> Result<Document, ActionError> {
    let tenant_id = tenant.tenant_id;
    let document = conn
        .transaction::<_, ActionError, _>(async |conn| {
            hold(conn, tenant).await?;
            // Job rows before the document row (docs/decisions.md, "Lock order"): the
            // queued purge this cancels is what a DELETE of the trashed document holds
            // before it locks the document.
            jobs::lock_document_jobs(conn, tenant_id, document_id).await?;
            let current = documents::lock_document(conn, tenant_id, document_id)
                .await?
                .ok_or(ActionError::NotFound)?;
            // The row is locked: the version seen here is the one the UPDATE guards.
            if !if_match.admits(current.row_version) {
                return Err(ActionError::VersionMismatch);
            }
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
            documents::restore_document(conn, tenant_id, document_id, if_match)
                .await?
                .ok_or(ActionError::VersionMismatch)
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
/// id and current version, in one transaction; a missing document is reported in its
/// result, not as an error.
async fn enqueue_each<J: BackgroundJob>(
    conn: &mut AsyncPgConnection,
    caller: &DocumentCaller,
    ids: &[Uuid],
    job_for: impl Fn(Uuid, Uuid) -> J + Sync,
) -> Result<Vec<BulkResult>, ActionError> {
    if ids.is_empty() || ids.len() > MAX_BULK_IDS {
        return Err(ActionError::Invalid {
            code: "invalid_ids",
            detail: format!("send 1 to {MAX_BULK_IDS} document ids"),
        });
    }
    conn.transaction::<_, ActionError, _>(async |conn| {
        hold(conn, &caller.tenant_write()).await?;
        let mut results = Vec::with_capacity(ids.len());
        for &document_id in ids {
            let document = documents::find_document(conn, caller.tenant_id, document_id).await?;
            let Some(version_id) = document.and_then(|document| document.current_version_id) else {
                results.push((document_id, None));
                continue;
            };
            // One document is someone waiting for it; many are bulk work.
            let job = NewJob::new(
                caller.tenant_id,
                job_for(document_id, version_id),
                caller.configured_attempts,
                caller.request_id.clone(),
            )
            .with_priority(Priority::of_request(ids.len()));
            results.push((document_id, jobs::enqueue_or_active(conn, &job).await?));
        }
        Ok(results)
    })
    .await
}

/// An uploaded file, already streamed to the object store under `key`.
#[derive(Debug, Clone)]
pub struct StoredUpload {
    pub key: StorageKey,
    pub version_id: Uuid,
    pub digest: Digested,
    /// Decided from the bytes, never from the client.
    pub content_type: String,
    /// For display only (already cleaned of paths and control characters).
    pub original_filename: Option<String>,
    pub title: Option<String>,
}

/// Records stored bytes as a new document: its version, its `analyze-document` job and
/// the outbox event, in one statement (`intake::record`; with `reject_duplicates`, the
/// same statement applies the duplicate rule: the same bytes twice in a tenant answer
/// `duplicate_document` with the existing id). The answer carries what holds the job.
/// The title defaults to the filename, then `Untitled`. When nothing is recorded the
/// object is removed at once: nothing points at it. With `express`, the job's event may
/// be born claimed by the caller's process (`Recorded::announce`): the caller publishes
/// it once the upload has committed (`publishing::Express::publish`).
pub async fn upload(
    conn: &mut AsyncPgConnection,
    store: &dyn ObjectStore,
    caller: &DocumentCaller,
    stored: StoredUpload,
    reject_duplicates: bool,
    express: Option<ExpressClaim<'_>>,
) -> Result<Recorded, ActionError> {
    let recorded = record_upload(conn, caller, &stored, reject_duplicates, express).await;
    match &recorded {
        Ok(recorded) => tracing::info!(
            document_id = %recorded.document.id,
            job_id = %recorded.job.id,
            tenant_id = %caller.tenant_id,
            user_id = %caller.user_id,
            size_bytes = stored.digest.size_bytes,
            "document uploaded"
        ),
        Err(_) => discard(store, &stored.key).await,
    }
    recorded
}

/// Removes the object of an upload nothing will point at (rather than wait for the
/// storage GC).
pub async fn discard(store: &dyn ObjectStore, key: &StorageKey) {
    if let Err(error) = store.delete(key).await {
        tracing::warn!(%error, key = key.as_str(), "failed to remove an unrecorded upload");
    }
}

/// The duplicate rule of every upload (a new document, a new version): the same bytes
/// as the current version of a live document of the tenant answer `duplicate_document`
/// with that document's id. Call in the upload's transaction: it holds, to its end, the
/// lock that serialises uploads of the same bytes in the tenant.
pub(crate) async fn refuse_duplicate(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    sha256: &str,
) -> Result<(), ActionError> {
    match documents::lock_and_find_same_content(conn, tenant_id, sha256).await? {
        Some(existing) => Err(duplicate_document(existing)),
        None => Ok(()),
    }
}

/// The answer of the duplicate rule: `existing` has the same bytes.
fn duplicate_document(existing: Uuid) -> ActionError {
    ActionError::Conflict {
        code: "duplicate_document",
        detail: "a document with the same content exists already".to_owned(),
        extension: Some(("existing_document_id", existing.to_string())),
    }
}

async fn record_upload(
    conn: &mut AsyncPgConnection,
    caller: &DocumentCaller,
    stored: &StoredUpload,
    reject_duplicates: bool,
    express: Option<ExpressClaim<'_>>,
) -> Result<Recorded, ActionError> {
    let document_id = Uuid::now_v7();
    let title = stored
        .title
        .clone()
        .filter(|title| !title.is_empty())
        .or_else(|| stored.original_filename.clone())
        .unwrap_or_else(|| "Untitled".to_owned())
        .chars()
        .take(MAX_TITLE_CHARS)
        .collect();
    let document = NewDocument {
        id: document_id,
        tenant_id: caller.tenant_id,
        title,
        version_id: stored.version_id,
        storage_key: stored.key.as_str().to_owned(),
        size_bytes: i64::try_from(stored.digest.size_bytes).unwrap_or(i64::MAX),
        sha256: stored.digest.sha256.clone(),
        content_type: stored.content_type.clone(),
        original_filename: stored.original_filename.clone(),
    };
    let analyze = AnalyzeDocument {
        document_id,
        document_version_id: stored.version_id,
        force: false,
    };
    let job = NewJob::new(
        caller.tenant_id,
        analyze,
        caller.configured_attempts,
        caller.request_id.clone(),
    );
    let intake = NewIntake { document, job };
    let tenant = caller.tenant_write();
    // One statement either way, atomic on its own (tenant check and, with the duplicate
    // rule, its lock included): no transaction needed.
    if reject_duplicates {
        return match intake::record_new_content(conn, &tenant, &intake, express).await? {
            Ok(recorded) => Ok(recorded),
            Err(NotRecorded::SameContent(existing)) => Err(duplicate_document(existing)),
            Err(NotRecorded::Refused(refused)) => Err(refused.into()),
        };
    }
    intake::record(conn, &tenant, std::slice::from_ref(&intake), express)
        .await??
        .into_iter()
        .next()
        .ok_or(ActionError::Db(DbError::Query(
            diesel::result::Error::NotFound,
        )))
}

/// What an edit changes beyond the document row itself: the user's labels, which no
/// matching rule overrides (`db::labels::set_document_tags`).
#[derive(Debug, Clone, Default)]
pub struct LabelEdit {
    /// Replaces the document's tags.
    pub tags: Option<Vec<String>>,
    /// `Some(None)` clears the correspondent.
    pub correspondent: Option<Option<String>>,
}

/// A document after an edit, with the analysis its new title queued (or the one already
/// active), if any.
#[derive(Debug)]
pub struct Edited {
    pub document: Document,
    pub version: Option<DocumentVersion>,
    pub job: Option<Job>,
    pub labels: Option<Labels>,
}

/// Edits a live document in one transaction: its row, tags and correspondent, its
/// search vector at once, and — for a new title — an analysis of its version (unless
/// one is queued or running already: that one sees the new title).
pub async fn edit(
    conn: &mut AsyncPgConnection,
    caller: &DocumentCaller,
    document_id: Uuid,
    edit: &DocumentEdit,
    label_edit: &LabelEdit,
) -> Result<Edited, ActionError> {
    edit_if(conn, caller, document_id, edit, label_edit, &IfMatch::Any).await
}

/// `edit` of a document at a version `if_match` admits (`If-Match`), else
/// `VersionMismatch` and nothing changes; the guard is in the edit's UPDATE, so of two
/// edits made from the same version exactly one applies.
pub async fn edit_if(
    conn: &mut AsyncPgConnection,
    caller: &DocumentCaller,
    document_id: Uuid,
    edit: &DocumentEdit,
    label_edit: &LabelEdit,
    if_match: &IfMatch,
) -> Result<Edited, ActionError> {
    let tenant_id = caller.tenant_id;
    conn.transaction::<_, ActionError, _>(async |conn| {
        hold(conn, &caller.tenant_write()).await?;
        let before = documents::find_document(conn, tenant_id, document_id)
            .await?
            .ok_or(ActionError::NotFound)?;
        let retitled = edit
            .title
            .as_ref()
            .is_some_and(|title| *title != before.title);
        if retitled {
            // A new title enqueues an analysis, which waits in the one-active-analysis
            // index for a finishing one: job rows before the document row, the lock order
            // of every finish (holding the document here, the two deadlocked).
            jobs::lock_document_jobs(conn, tenant_id, document_id).await?;
        }
        let labels_change = label_edit.tags.is_some() || label_edit.correspondent.is_some();
        // A label change always updates the row (its version is the ETag, and the labels
        // are in the view), so the guarded UPDATE also takes the row lock: a user's labels
        // and an analysis's rules take the document row in turn, and the one that comes
        // second sees what the first chose (`db::auto_labels::apply`).
        let Some(edited) =
            documents::edit_document(conn, tenant_id, document_id, edit, labels_change, if_match)
                .await?
        else {
            // Trashed meanwhile (missing), or changed since the caller read it.
            return match documents::find_document(conn, tenant_id, document_id).await? {
                Some(_) => Err(ActionError::VersionMismatch),
                None => Err(ActionError::NotFound),
            };
        };
        if let Some(tags) = &label_edit.tags {
            labels::set_document_tags(conn, tenant_id, document_id, tags).await?;
        }
        if let Some(correspondent) = &label_edit.correspondent {
            labels::set_correspondent(conn, tenant_id, document_id, correspondent.as_deref())
                .await?;
        }
        // Title, tags and correspondent are searchable at once, text or no text.
        analysis::reindex(conn, document_id).await?;
        let mut job = None;
        if let (true, Some(version_id)) = (edited.title != before.title, edited.current_version_id)
        {
            let analyze = AnalyzeDocument {
                document_id,
                document_version_id: version_id,
                force: false,
            };
            let analyze = NewJob::new(
                tenant_id,
                analyze,
                caller.configured_attempts,
                caller.request_id.clone(),
            );
            job = jobs::enqueue_or_active(conn, &analyze).await?;
        }
        // Read again: a new correspondent bumped the row version once more.
        let after = documents::find_document(conn, tenant_id, document_id)
            .await?
            .unwrap_or(edited);
        let version = documents::current_version(conn, &after).await?;
        let mut found = labels::labels_of(conn, tenant_id, &[document_id]).await?;
        Ok(Edited {
            document: after,
            version,
            job,
            labels: found.remove(&document_id),
        })
    })
    .await
}
