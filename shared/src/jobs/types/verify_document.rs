//! `verify-document`: the integrity check alone. On success the document keeps its status;
//! on a mismatch (or a missing object) the job and the document end `FAILED`.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::db::jobs::Job;
use crate::integrity;
use crate::jobs::{BackgroundJob, Description, JobContext, JobError};
use crate::states::TenantStatus;

/// Payload of `verify-document`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyDocument {
    pub document_id: Uuid,
    pub document_version_id: Uuid,
}

#[async_trait]
impl BackgroundJob for VerifyDocument {
    const JOB_TYPE: &'static str = "verify-document";
    const DESCRIPTION: Description = Description {
        payload: &[("document_id", "uuid"), ("document_version_id", "uuid")],
        enqueued_by: "bulk verify, scheduled scrub",
        work: "integrity check only: document status unchanged on success, FAILED on mismatch",
    };
    const TENANT_GUARD: Option<TenantStatus> = Some(TenantStatus::Active);
    const TIME_LIMIT: Duration = Duration::from_secs(300);

    fn document_id(&self) -> Option<Uuid> {
        Some(self.document_id)
    }

    async fn run(
        &self,
        context: &JobContext,
        job: &Job,
        _cancelled: &CancellationToken,
    ) -> Result<(), JobError> {
        let version = integrity::load_version(
            context,
            job.tenant_id,
            self.document_id,
            self.document_version_id,
        )
        .await?;
        integrity::verify(context.store.as_ref(), &version).await
    }
}
