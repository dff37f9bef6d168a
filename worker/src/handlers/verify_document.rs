//! `verify-document`: the integrity check alone. On success the document keeps its status;
//! on a mismatch (or a missing object) the job and the document end `FAILED`.

use async_trait::async_trait;
use quire_shared::catalogue::{JobType, VerifyDocumentPayload};
use quire_shared::db::jobs::Job;
use tokio_util::sync::CancellationToken;

use super::JobHandler;
use super::guards;
use super::integrity;
use crate::context::WorkerContext;
use crate::outcome::JobError;

pub struct VerifyDocument;

#[async_trait]
impl JobHandler for VerifyDocument {
    fn job_type(&self) -> JobType {
        JobType::VerifyDocument
    }

    async fn run(
        &self,
        context: &WorkerContext,
        job: &Job,
        _cancelled: &CancellationToken,
    ) -> Result<(), JobError> {
        let payload: VerifyDocumentPayload = guards::payload(job)?;
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
