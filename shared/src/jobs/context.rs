//! What every job run gets from the process running it.

use std::sync::Arc;

use super::JobError;
use crate::config::Settings;
use crate::db::documents::DocumentVersion;
use crate::db::jobs::{self, Fence};
use crate::db::{PgPool, PooledConnection};
use crate::storage::{ByteStream, Digested, ObjectStore, StorageKey, put_digested};

#[derive(Clone)]
pub struct JobContext {
    /// The worker running the job (random per process start).
    pub worker_id: String,
    pub pool: PgPool,
    pub store: Arc<dyn ObjectStore>,
    pub settings: Arc<Settings>,
    /// The document version the job's claim read (`jobs::ClaimedJob::version`), which
    /// [`integrity::load_version`](crate::integrity::load_version) hands out instead of
    /// reading it again. `None` in the worker's shared context and for jobs without one.
    pub claimed_version: Option<DocumentVersion>,
}

impl JobContext {
    /// This context for one run, with the version its claim read.
    pub fn for_run(&self, claimed_version: Option<DocumentVersion>) -> Self {
        Self {
            claimed_version,
            ..self.clone()
        }
    }

    /// A connection for a handler; a pool that cannot give one is worth another attempt.
    pub async fn connection(&self) -> Result<PooledConnection, JobError> {
        self.pool.get().await.map_err(JobError::database)
    }

    /// Stops the run ([`JobError::FenceLost`]) unless its fence still holds.
    pub async fn ensure_fence(&self, fence: &Fence) -> Result<(), JobError> {
        let mut conn = self.connection().await?;
        if jobs::fence_holds(&mut conn, fence)
            .await
            .map_err(JobError::database)?
        {
            Ok(())
        } else {
            Err(JobError::FenceLost)
        }
    }

    /// The one way a run writes an object: its fence is checked first, so a cancelled or
    /// taken-over run (a purged document, a wiped tenant) stops before it writes. The key
    /// must be one of the run's own ([`StorageKey::attempt_asset`]): a write that slips
    /// past the check (the job moved on during the put) then lands on a key no row names.
    pub async fn put_fenced(
        &self,
        fence: &Fence,
        key: &StorageKey,
        body: ByteStream<'_>,
    ) -> Result<Digested, JobError> {
        self.ensure_fence(fence).await?;
        put_digested(self.store.as_ref(), key, body, u64::MAX)
            .await
            .map_err(JobError::storage_unavailable)
    }
}
