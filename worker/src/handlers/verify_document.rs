//! `verify-document`: the integrity check alone. On success the document keeps its status;
//! on a mismatch (or a missing object) the job and the document end `FAILED`.

use async_trait::async_trait;
use quire_shared::catalogue::{JobType, VerifyDocumentPayload};
use quire_shared::db::jobs::Job;
use tokio_util::sync::CancellationToken;

use super::JobHandler;
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
        let payload: VerifyDocumentPayload = serde_json::from_value(job.payload.clone())
            .map_err(|_| JobError::permanent("invalid_payload", "the job payload is not valid"))?;
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
