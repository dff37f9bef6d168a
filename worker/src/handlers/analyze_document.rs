//! `analyze-document`: VerifyIntegrity → GenerateThumbnails → ExtractText →
//! DetermineIssuedAt → IndexDocument. The document is `PROCESSING` from the start of a
//! run, `READY` with the job's success, `FAILED` with a safe error when the file cannot
//! be analyzed. Assets are keyed by version and kind and upserted, so a re-run after a
//! crash produces the same result; every write is fenced by the job's claim.

use async_trait::async_trait;
use diesel_async::{AsyncConnection, AsyncPgConnection};
use quire_shared::catalogue::{AnalyzeDocumentPayload, JobType};
use quire_shared::db::DbError;
use quire_shared::db::analysis::{self, Findings};
use quire_shared::db::assets::{self, AssetKind, NewAsset};
use quire_shared::db::documents::DocumentVersion;
use quire_shared::db::jobs::{Fence, Job};
use quire_shared::storage::{Digested, StorageKey, put_digested};
use tokio_util::sync::CancellationToken;

use super::guards::{self, database_unavailable};
use super::{JobHandler, integrity};
use crate::analysis::{Analysis, AnalysisError, Analyzer};
use crate::context::WorkerContext;
use crate::outcome::JobError;

pub struct AnalyzeDocument {
    pub analyzer: Analyzer,
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
    context: &WorkerContext,
    version: &DocumentVersion,
    kind: AssetKind,
    bytes: Vec<u8>,
) -> Result<(StorageKey, Digested), JobError> {
    let key = StorageKey::version_asset(version.tenant_id, version.document_id, version.id, kind);
    let body = futures_util::stream::once(async move { Ok(bytes::Bytes::from(bytes)) });
    let digest = put_digested(context.store.as_ref(), &key, Box::pin(body), u64::MAX)
        .await
        .map_err(|error| {
            JobError::transient(
                "storage_unavailable",
                "the document storage is unavailable",
                error,
            )
        })?;
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
impl JobHandler for AnalyzeDocument {
    fn job_type(&self) -> JobType {
        JobType::AnalyzeDocument
    }

    async fn run(
        &self,
        context: &WorkerContext,
        job: &Job,
        cancelled: &CancellationToken,
    ) -> Result<(), JobError> {
        let payload: AnalyzeDocumentPayload = guards::payload(job)?;
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
        {
            let mut conn = context.pool.get().await.map_err(database_unavailable)?;
            let started =
                analysis::start_processing(&mut conn, &fence, job.tenant_id, payload.document_id)
                    .await
                    .map_err(database_unavailable)?;
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
        let found = self
            .analyzer
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
        let mut conn = context.pool.get().await.map_err(database_unavailable)?;
        let indexed = index(&mut conn, &fence, &version, &found, &stored)
            .await
            .map_err(database_unavailable)?;
        if !indexed {
            // The job moved on without this worker; its finish will be fenced off too.
            tracing::warn!("analysis results not recorded: the claim no longer holds");
        }
        Ok(())
    }

    fn writes_on_success(&self) -> bool {
        true
    }

    async fn commit_success(&self, conn: &mut AsyncPgConnection, job: &Job) -> Result<(), DbError> {
        let Ok(payload) = guards::payload::<AnalyzeDocumentPayload>(job) else {
            return Ok(());
        };
        analysis::mark_ready(
            conn,
            job.tenant_id,
            payload.document_id,
            payload.document_version_id,
        )
        .await?;
        Ok(())
    }
}
