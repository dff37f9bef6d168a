//! `analyze-document`: VerifyIntegrity → GenerateThumbnails → ExtractText (a scan turned
//! upright, straightened, read, and laid into its searchable archive copy) →
//! DetermineIssuedAt → MatchLabels → IndexDocument, for the version its payload names. The version is
//! `PROCESSING` from the start of a run, `READY` with the job's success, `FAILED` with a
//! safe error when the file cannot be analyzed; the document follows while that version
//! is its current one. A newer version becomes current with its analysis's success (the
//! previous one stays current and searchable until then), unless a still newer one
//! became current first (docs/decisions.md, "Document versions"). Every write is fenced
//! by the job's claim: each object write checks the
//! fence first and goes to a key of this run's own, and only the fenced IndexDocument
//! commit makes those objects current (the asset rows, keyed by version and kind, name
//! them). Objects of a run that lost its fence are deleted by the run, or left to the
//! storage GC when the run was dropped (docs/decisions.md, "Fenced object writes").

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use diesel_async::{AsyncConnection, AsyncPgConnection};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::actions::settings;
use crate::analysis::{Analysis, AnalysisError, Analyzer};
use crate::db::DbError;
use crate::db::analysis::{self, Findings};
use crate::db::assets::{self, AssetKind, NewAsset, Upserted};
use crate::db::{auto_labels, label_catalog};
use crate::db::documents::DocumentVersion;
use crate::db::jobs::{self, Fence, Job};
use crate::fault_points::{self, Point};
use crate::integrity;
use crate::jobs::{BackgroundJob, Description, JobContext, JobError};
use crate::matching::{self, Matched};
use crate::states::TenantStatus;
use crate::storage::{ByteStream, Digested, StorageKey};

/// Payload of `analyze-document`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalyzeDocument {
    pub document_id: Uuid,
    pub document_version_id: Uuid,
    pub force: bool,
}

fn analysis_error(error: AnalysisError) -> JobError {
    if error.is_transient() {
        let (code, message) = (error.code(), error.safe_message());
        JobError::transient(code, message, error)
    } else {
        JobError::document_failed(error.code(), error.safe_message())
    }
}

/// The objects this run wrote. None is current until the fenced commit names it; on
/// every other way out they are deleted, since no row will ever name them.
#[derive(Default)]
struct RunObjects {
    written: Vec<StorageKey>,
}

impl RunObjects {
    /// Stores one asset's bytes under a key of this run's own, once the fence is checked.
    async fn put(
        &mut self,
        context: &JobContext,
        fence: &Fence,
        version: &DocumentVersion,
        kind: AssetKind,
        bytes: Vec<u8>,
    ) -> Result<(StorageKey, Digested), JobError> {
        let body = futures_util::stream::once(async move { Ok(bytes::Bytes::from(bytes)) });
        self.put_stream(context, fence, version, kind, Box::pin(body))
            .await
    }

    /// Stores one asset streamed from a file of the run's work folder (the archive copy,
    /// as large as the scan's pages: never read whole into memory).
    async fn put_file(
        &mut self,
        context: &JobContext,
        fence: &Fence,
        version: &DocumentVersion,
        kind: AssetKind,
        path: &Path,
    ) -> Result<(StorageKey, Digested), JobError> {
        let file = tokio::fs::File::open(path).await.map_err(|error| {
            JobError::transient(
                "worker_disk_unavailable",
                "the worker cannot read its temporary files",
                error,
            )
        })?;
        let body = tokio_util::io::ReaderStream::new(file);
        self.put_stream(context, fence, version, kind, Box::pin(body))
            .await
    }

    async fn put_stream(
        &mut self,
        context: &JobContext,
        fence: &Fence,
        version: &DocumentVersion,
        kind: AssetKind,
        body: ByteStream<'_>,
    ) -> Result<(StorageKey, Digested), JobError> {
        let key = StorageKey::attempt_asset(
            version.tenant_id,
            version.document_id,
            version.id,
            kind,
            fence,
        );
        // Noted before the put: a put that fails half-way may still leave an object.
        self.written.push(key.clone());
        let digest = context.put_fenced(fence, &key, body).await?;
        Ok((key, digest))
    }

    /// Deletes what this run wrote (the run is not going to make it current). A delete
    /// that fails is left for the storage GC: nothing names the object.
    async fn discard(self, context: &JobContext) {
        delete_objects(context, &self.written).await;
    }
}

/// Best-effort deletes of objects no row names (any more).
async fn delete_objects(context: &JobContext, keys: &[StorageKey]) {
    for key in keys {
        if let Err(error) = context.store.delete(key).await {
            tracing::warn!(%error, "an object no row names could not be deleted, left to the storage gc");
        }
    }
}

/// What the IndexDocument transaction did.
enum Indexed {
    /// Findings and assets are current; these objects the rows named before are not.
    Current { superseded: Vec<StorageKey> },
    /// The version is gone: nothing to record for it.
    DocumentMovedOn,
}

#[derive(Debug)]
enum IndexError {
    Db(DbError),
    /// The fence no longer holds: the transaction is rolled back whole.
    FenceLost,
}

impl From<diesel::result::Error> for IndexError {
    fn from(error: diesel::result::Error) -> Self {
        Self::Db(error.into())
    }
}

impl From<DbError> for IndexError {
    fn from(error: DbError) -> Self {
        Self::Db(error)
    }
}

/// IndexDocument: the version's findings (text, date, the labels the rules found) and
/// assets in ONE fenced transaction — the commit that makes this run's objects the
/// version's. Every statement carries the fence; if any finds it gone, all of it rolls
/// back. The findings reach the document and its search vector with the job's success
/// (`commit_success`), when the version is, or becomes, the current one.
async fn index(
    conn: &mut AsyncPgConnection,
    fence: &Fence,
    version: &DocumentVersion,
    analysis: &Analysis,
    matched: &Matched,
    stored: &[(AssetKind, StorageKey, Digested, &'static str)],
) -> Result<Indexed, IndexError> {
    conn.transaction::<_, IndexError, _>(async |conn| {
        if !jobs::fence_holds(conn, fence).await? {
            return Err(IndexError::FenceLost);
        }
        let labels_apply =
            auto_labels::lock_for_version(conn, version.tenant_id, version.document_id, version.id)
                .await?;
        let findings = Findings {
            version_id: version.id,
            text: &analysis.text,
            issued_at: analysis.issued_at,
        };
        if !analysis::record_findings(
            conn,
            fence,
            version.tenant_id,
            version.document_id,
            &findings,
        )
        .await?
        {
            // The fence held a statement ago, so the version is what is gone.
            return Ok(Indexed::DocumentMovedOn);
        }
        // The labels follow the version that is, or is about to become, the current one.
        // Changed links live outside the documents row: touching it gives the new ETag.
        if labels_apply
            && auto_labels::apply(conn, version.tenant_id, version.document_id, matched).await?
        {
            label_catalog::touch_documents(conn, version.tenant_id, &[version.document_id])
                .await?;
            analysis::reindex(conn, version.document_id).await?;
        }
        let mut superseded = Vec::new();
        for (kind, key, digest, content_type) in stored {
            let upserted = assets::upsert(
                conn,
                fence,
                &NewAsset {
                    tenant_id: version.tenant_id,
                    document_id: version.document_id,
                    version_id: version.id,
                    kind: *kind,
                    storage_key: key.as_str(),
                    size_bytes: i64::try_from(digest.size_bytes).unwrap_or(i64::MAX),
                    sha256: &digest.sha256,
                    content_type,
                },
            )
            .await?;
            match upserted {
                Upserted::Stale => return Err(IndexError::FenceLost),
                Upserted::Current { superseded: old } => {
                    // A key that is not ours is left alone, never guessed at.
                    superseded.extend(old.as_deref().and_then(StorageKey::from_stored));
                }
            }
        }
        Ok(Indexed::Current { superseded })
    })
    .await
}

/// Stores the assets under this run's keys and makes them current in the fenced commit.
async fn store_and_index(
    context: &JobContext,
    fence: &Fence,
    version: &DocumentVersion,
    found: &Analysis,
    matched: &Matched,
    objects: &mut RunObjects,
) -> Result<Indexed, JobError> {
    let (thumbnail_key, thumbnail) = objects
        .put(
            context,
            fence,
            version,
            AssetKind::Thumbnail,
            found.thumbnail.clone(),
        )
        .await?;
    let (text_key, text) = objects
        .put(
            context,
            fence,
            version,
            AssetKind::Text,
            found.text.clone().into_bytes(),
        )
        .await?;
    let mut stored = vec![
        (AssetKind::Thumbnail, thumbnail_key, thumbnail, "image/png"),
        (AssetKind::Text, text_key, text, "text/plain; charset=utf-8"),
    ];
    if let Some(archive) = &found.archive {
        let (archive_key, digest) = objects
            .put_file(context, fence, version, AssetKind::Archive, archive)
            .await?;
        stored.push((AssetKind::Archive, archive_key, digest, "application/pdf"));
    }
    fault_points::pass(Point::AnalysisBeforeIndex, version.document_id).await;
    let mut conn = context.connection().await?;
    match index(&mut conn, fence, version, found, matched, &stored).await {
        Ok(indexed) => Ok(indexed),
        Err(IndexError::FenceLost) => Err(JobError::FenceLost),
        Err(IndexError::Db(error)) => Err(JobError::database(error)),
    }
}

#[async_trait]
impl BackgroundJob for AnalyzeDocument {
    const JOB_TYPE: &'static str = "analyze-document";
    const DESCRIPTION: Description = Description {
        payload: &[
            ("document_id", "uuid"),
            ("document_version_id", "uuid"),
            ("force", "boolean"),
        ],
        enqueued_by: "upload, new version, bulk re-analyze, metadata edit",
        work: "verify integrity, thumbnails, text and OCR, issued-at date, matching rules, search index",
    };
    const TENANT_GUARD: Option<TenantStatus> = Some(TenantStatus::Active);
    const TIME_LIMIT: Duration = Duration::from_secs(600);
    const ANALYSIS_SLOT: bool = true;
    const OWNS_DOCUMENT_STATUS: bool = true;
    const WRITES_ON_SUCCESS: bool = true;

    fn document_id(&self) -> Option<Uuid> {
        Some(self.document_id)
    }

    /// One active analysis per document version (the partial unique index says so too).
    fn identity(&self) -> serde_json::Value {
        serde_json::json!({ "document_version_id": self.document_version_id })
    }

    async fn run(
        &self,
        context: &JobContext,
        job: &Job,
        cancelled: &CancellationToken,
    ) -> Result<(), JobError> {
        let payload = self;
        let fence = job.fence().ok_or(JobError::permanent(
            "job_not_claimed",
            "the job is not claimed",
        ))?;
        let version = integrity::load_version(
            context,
            job.tenant_id,
            payload.document_id,
            payload.document_version_id,
        )
        .await?;
        let date_reading = {
            let mut conn = context.connection().await?;
            let started = analysis::start_processing(
                &mut conn,
                &fence,
                job.tenant_id,
                payload.document_id,
                payload.document_version_id,
            )
            .await
            .map_err(JobError::database)?;
            if !started {
                return Err(JobError::permanent(
                    "document_missing",
                    "the document is gone or in the trash",
                ));
            }
            // The tenant's date languages and order, as they are when the run starts.
            settings::date_reading(&mut conn, job.tenant_id, &context.settings.analysis)
                .await
                .map_err(JobError::database)?
        };

        let work = tempfile::tempdir().map_err(|error| {
            JobError::transient(
                "worker_disk_unavailable",
                "the worker cannot write temporary files",
                error,
            )
        })?;
        let source = work.path().join("source");
        integrity::fetch_verified(context.store.as_ref(), &version, &source).await?;
        if cancelled.is_cancelled() {
            return Ok(());
        }
        let found = Analyzer::new(context.settings.analysis.clone())
            .reading_dates(date_reading)
            .analyze(&source, &version.content_type, work.path())
            .await
            .map_err(analysis_error)?;
        if cancelled.is_cancelled() {
            return Ok(());
        }
        let matched = match_labels(context, job.tenant_id, &found.text).await?;
        if cancelled.is_cancelled() {
            return Ok(());
        }

        fault_points::pass(Point::AnalysisBeforeStore, payload.document_id).await;
        let mut objects = RunObjects::default();
        match store_and_index(context, &fence, &version, &found, &matched, &mut objects).await {
            Ok(Indexed::Current { superseded }) => {
                // Current no more: nobody reads them after the commit above.
                delete_objects(context, &superseded).await;
                Ok(())
            }
            Ok(Indexed::DocumentMovedOn) => {
                objects.discard(context).await;
                tracing::info!("analysis results not recorded: the version is gone");
                Ok(())
            }
            Err(error) => {
                // Nothing this run wrote became current; a retry writes keys of its own.
                objects.discard(context).await;
                Err(error)
            }
        }
    }

    async fn commit_success(
        &self,
        _context: &JobContext,
        conn: &mut AsyncPgConnection,
        job: &Job,
    ) -> Result<(), DbError> {
        let outcome = analysis::make_current(
            conn,
            job.tenant_id,
            self.document_id,
            self.document_version_id,
        )
        .await?;
        match outcome {
            // Announced only when this success made the version current and the document
            // ready (a newer current version or a trash in between leaves the document as
            // it is, and says nothing).
            analysis::Outcome::Current => {
                crate::events::document_ready(
                    conn,
                    job.tenant_id,
                    self.document_id,
                    self.document_version_id,
                    job.id,
                )
                .await?;
            }
            analysis::Outcome::Superseded => tracing::info!(
                version_id = %self.document_version_id,
                "version analyzed; a newer version is current"
            ),
            analysis::Outcome::Gone => {}
        }
        Ok(())
    }
}

/// MatchLabels: the tenant's matching rules over the extracted text, on a blocking thread
/// (CPU work, linear in the text per rule) and outside any transaction; IndexDocument
/// writes what they found. A rule changed in between applies from the next analysis.
async fn match_labels(
    context: &JobContext,
    tenant_id: Uuid,
    text: &str,
) -> Result<Matched, JobError> {
    let rules = {
        let mut conn = context.connection().await?;
        auto_labels::load_rules(&mut conn, tenant_id)
            .await
            .map_err(JobError::database)?
    };
    if rules.is_empty() {
        return Ok(Matched::default());
    }
    let text = text.to_owned();
    // A blocking thread is not dropped with the job (a time limit, a cancellation): it
    // stops at the next rule once this future is gone.
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    let _stop_when_dropped = stop.drop_guard();
    let evaluated = tokio::task::spawn_blocking(move || {
        matching::evaluate(&rules.tags, &rules.correspondents, &text, || {
            stopped.is_cancelled()
        })
    })
    .await;
    match evaluated {
        Ok(Some(matched)) => Ok(matched),
        // Only this future's drop stops it; never taken as "nothing matched".
        Ok(None) => Err(JobError::transient(
            "worker_shutting_down",
            "the worker stopped while matching labels",
            anyhow::anyhow!("label matching stopped"),
        )),
        // A bug in a matcher is this attempt's failure (`handler_panicked`), as for the
        // analysis's own blocking steps.
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(error) => Err(JobError::transient(
            "worker_shutting_down",
            "the worker stopped while matching labels",
            error,
        )),
    }
}
