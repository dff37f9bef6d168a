//! `purge-document`: removes a trashed document for good — every stored version object,
//! then its rows. The document row stays locked throughout, so a restore cannot
//! interleave; a re-run after a crash finds less to do and finishes (idempotent). The
//! job's own row survives as the audit record.

use async_trait::async_trait;
use diesel_async::AsyncConnection;
use quire_shared::catalogue::{JobType, PurgeDocumentPayload};
use quire_shared::db::jobs::Job;
use quire_shared::db::{DbError, documents};
use quire_shared::storage::{StorageError, StorageKey};
use tokio_util::sync::CancellationToken;

use super::JobHandler;
use super::guards::{self, database_unavailable};
use crate::context::WorkerContext;
use crate::outcome::JobError;

pub struct PurgeDocument;

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
impl JobHandler for PurgeDocument {
    fn job_type(&self) -> JobType {
        JobType::PurgeDocument
    }

    async fn run(
        &self,
        context: &WorkerContext,
        job: &Job,
        _cancelled: &CancellationToken,
    ) -> Result<(), JobError> {
        let payload: PurgeDocumentPayload = guards::payload(job)?;
        let (tenant_id, document_id) = (job.tenant_id, payload.document_id);
        let mut conn = context.pool.get().await.map_err(database_unavailable)?;
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
                documents::delete_trashed_document(conn, tenant_id, document_id).await?;
                Ok(Purge::Done)
            })
            .await;
        match purged {
            Ok(Purge::Done) => Ok(()),
            Ok(Purge::Restored) => Err(JobError::permanent(
                "document_restored",
                "the document was restored before the purge ran",
            )),
            Err(PurgeError::Db(error)) => Err(database_unavailable(error)),
            Err(PurgeError::Storage(error)) => Err(JobError::transient(
                "storage_unavailable",
                "the document storage is unavailable",
                error,
            )),
        }
    }
}
