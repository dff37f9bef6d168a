//! `analyze-document`: VerifyIntegrity → GenerateThumbnails → ExtractText →
//! DetermineIssuedAt → IndexDocument. The document is `PROCESSING` from the start of a
//! run, `READY` with the job's success, `FAILED` with a safe error when the file cannot
//! be analyzed. Assets are keyed by version and kind and upserted, so a re-run after a
//! crash produces the same result; every write is fenced by the job's claim.

use std::time::Duration;

use async_trait::async_trait;
use diesel_async::{AsyncConnection, AsyncPgConnection};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::analysis::{Analysis, AnalysisError, Analyzer};
use crate::db::DbError;
use crate::db::analysis::{self, Findings};
use crate::db::assets::{self, AssetKind, NewAsset};
use crate::db::documents::DocumentVersion;
use crate::db::jobs::{Fence, Job};
use crate::integrity;
use crate::jobs::{BackgroundJob, Description, JobContext, JobError};
use crate::states::TenantStatus;
use crate::storage::{Digested, StorageKey, put_digested};

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

/// Stores one asset's bytes under its version-and-kind key.
async fn store_asset(
    context: &JobContext,
    version: &DocumentVersion,
    kind: AssetKind,
    bytes: Vec<u8>,
) -> Result<(StorageKey, Digested), JobError> {
    let key = StorageKey::version_asset(version.tenant_id, version.document_id, version.id, kind);
    let body = futures_util::stream::once(async move { Ok(bytes::Bytes::from(bytes)) });
    let digest = put_digested(context.store.as_ref(), &key, Box::pin(body), u64::MAX)
        .await
        .map_err(JobError::storage_unavailable)?;
    Ok((key, digest))
}

/// IndexDocument: text, date, assets and search vector in one fenced transaction.
async fn index(
    conn: &mut AsyncPgConnection,
    fence: &Fence,
    version: &DocumentVersion,
    analysis: &Analysis,
    stored: &[(AssetKind, StorageKey, Digested, &'static str)],
) -> Result<bool, DbError> {
    conn.transaction::<_, DbError, _>(async |conn| {
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
            return Ok(false);
        }
        for (kind, key, digest, content_type) in stored {
            assets::upsert(
                conn,
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
        }
        Ok(true)
    })
    .await
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
        enqueued_by: "upload, bulk re-analyze, metadata edit",
        work: "verify integrity, thumbnails, text and OCR, issued-at date, search index",
    };
    const TENANT_GUARD: Option<TenantStatus> = Some(TenantStatus::Active);
    const TIME_LIMIT: Duration = Duration::from_secs(600);
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
            &context.pool,
            job.tenant_id,
            payload.document_id,
            payload.document_version_id,
        )
        .await?;
        {
            let mut conn = context.connection().await?;
            let started =
                analysis::start_processing(&mut conn, &fence, job.tenant_id, payload.document_id)
                    .await
                    .map_err(JobError::database)?;
            if !started {
                return Err(JobError::permanent(
                    "document_missing",
                    "the document is gone or in the trash",
                ));
            }
        }

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
            .analyze(&source, &version.content_type, work.path())
            .await
            .map_err(analysis_error)?;
        if cancelled.is_cancelled() {
            return Ok(());
        }

        let (thumbnail_key, thumbnail) = store_asset(
            context,
            &version,
            AssetKind::Thumbnail,
            found.thumbnail.clone(),
        )
        .await?;
        let (text_key, text) = store_asset(
            context,
            &version,
            AssetKind::Text,
            found.text.clone().into_bytes(),
        )
        .await?;
        let stored = [
            (AssetKind::Thumbnail, thumbnail_key, thumbnail, "image/png"),
            (AssetKind::Text, text_key, text, "text/plain; charset=utf-8"),
        ];
        let mut conn = context.connection().await?;
        let indexed = index(&mut conn, &fence, &version, &found, &stored)
            .await
            .map_err(JobError::database)?;
        if !indexed {
            // The job moved on without this worker; its finish will be fenced off too.
            tracing::warn!("analysis results not recorded: the claim no longer holds");
        }
        Ok(())
    }

    async fn commit_success(
        &self,
        _context: &JobContext,
        conn: &mut AsyncPgConnection,
        job: &Job,
    ) -> Result<(), DbError> {
        analysis::mark_ready(
            conn,
            job.tenant_id,
            self.document_id,
            self.document_version_id,
        )
        .await?;
        Ok(())
    }
}
