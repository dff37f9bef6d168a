//! `analyze-document`: for now the integrity check only; the pipeline issue adds
//! thumbnails, text, dates and indexing. On success the document stays `PENDING`.

use async_trait::async_trait;
use quire_shared::catalogue::{AnalyzeDocumentPayload, JobType};
use quire_shared::db::jobs::Job;
use tokio_util::sync::CancellationToken;

use super::JobHandler;
use super::guards;
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
        let payload: AnalyzeDocumentPayload = guards::payload(job)?;
        let version = integrity::load_version(
            context,
            job.tenant_id,
            payload.document_id,
            payload.document_version_id,
        )
        .await?;
        integrity::verify(context.store.as_ref(), &version).await
    }
}
