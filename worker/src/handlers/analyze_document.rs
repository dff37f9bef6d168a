//! `analyze-document`: for now the integrity check only; the pipeline issue adds
//! thumbnails, text, dates and indexing. On success the document stays `PENDING`.

use async_trait::async_trait;
use quire_shared::catalogue::{AnalyzeDocumentPayload, JobType};
use quire_shared::db::documents;
use quire_shared::db::jobs::Job;
use quire_shared::states::TenantStatus;
use tokio_util::sync::CancellationToken;

use super::JobHandler;
use super::guards::{database_unavailable, ensure_tenant_status};
use super::integrity;
use crate::context::WorkerContext;
use crate::outcome::JobError;

pub struct AnalyzeDocument;

#[async_trait]
impl JobHandler for AnalyzeDocument {
    fn job_type(&self) -> JobType {
        JobType::AnalyzeDocument
    }

    async fn run(
        &self,
        context: &WorkerContext,
        job: &Job,
        _cancelled: &CancellationToken,
    ) -> Result<(), JobError> {
        let payload: AnalyzeDocumentPayload = serde_json::from_value(job.payload.clone())
            .map_err(|_| JobError::permanent("invalid_payload", "the job payload is not valid"))?;
        let version = {
            let mut conn = context.pool.get().await.map_err(database_unavailable)?;
            ensure_tenant_status(&mut conn, job.tenant_id, TenantStatus::Active).await?;
            documents::find_version(
                &mut conn,
                job.tenant_id,
                payload.document_id,
                payload.document_version_id,
            )
            .await
            .map_err(database_unavailable)?
            .ok_or(JobError::permanent(
                "document_missing",
                "the document version no longer exists",
            ))?
        };
        integrity::verify(context.store.as_ref(), &version).await
    }
}
