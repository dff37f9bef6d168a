//! `purge-document`: removes a trashed document for good — every stored version object,
//! then its rows. The document row stays locked throughout, so a restore cannot
//! interleave; a re-run after a crash finds less to do and finishes (idempotent). The
//! job's own row survives as the audit record.

use std::time::Duration;

use async_trait::async_trait;
use diesel_async::AsyncConnection;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::db::jobs::Job;
use crate::db::{DbError, documents};
use crate::jobs::{BackgroundJob, Description, JobContext, JobError};
use crate::states::TenantStatus;
use crate::storage::{StorageError, StorageKey};

/// Payload of `purge-document`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PurgeDocument {
    pub document_id: Uuid,
}

enum Purge {
    Done,
    Restored,
}

#[derive(Debug, thiserror::Error)]
enum PurgeError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("storage refused a deletion")]
    Storage(#[from] StorageError),
}

impl From<diesel::result::Error> for PurgeError {
    fn from(error: diesel::result::Error) -> Self {
        Self::Db(error.into())
    }
}

#[async_trait]
impl BackgroundJob for PurgeDocument {
    const JOB_TYPE: &'static str = "purge-document";
    const DESCRIPTION: Description = Description {
        payload: &[("document_id", "uuid")],
        enqueued_by: "DELETE of a trashed document, the empty-trash schedule",
        work: "remove every version and asset object, then the rows",
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
        let (tenant_id, document_id) = (job.tenant_id, self.document_id);
        let mut conn = context.connection().await?;
        let store = context.store.as_ref();
        let purged = conn
            .transaction::<_, PurgeError, _>(async |conn| {
                let Some(document) = documents::lock_document(conn, tenant_id, document_id).await?
                else {
                    // Purged already (a re-run after a crash): nothing left to do.
                    return Ok(Purge::Done);
                };
                if document.trashed_at.is_none() {
                    return Ok(Purge::Restored);
                }
                for key in documents::object_keys(conn, tenant_id, document_id).await? {
                    // A key that is not ours is left alone, never guessed at.
                    if let Some(key) = StorageKey::from_stored(&key) {
                        store.delete(&key).await?;
                    }
                }
                if documents::delete_trashed_document(conn, tenant_id, document_id).await? {
                    crate::events::document_purged(conn, tenant_id, document_id, job.id).await?;
                }
                Ok(Purge::Done)
            })
            .await;
        match purged {
            Ok(Purge::Done) => Ok(()),
            Ok(Purge::Restored) => Err(JobError::permanent(
                "document_restored",
                "the document was restored before the purge ran",
            )),
            Err(PurgeError::Db(error)) => Err(JobError::database(error)),
            Err(PurgeError::Storage(error)) => Err(JobError::storage_unavailable(error)),
        }
    }
}
