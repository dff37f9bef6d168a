//! What every job run gets from the process running it.

use std::sync::Arc;

use super::JobError;
use crate::config::Settings;
use crate::db::{PgPool, PooledConnection};
use crate::storage::ObjectStore;

pub struct JobContext {
    /// The worker running the job (random per process start).
    pub worker_id: String,
    pub pool: PgPool,
    pub store: Arc<dyn ObjectStore>,
    pub settings: Arc<Settings>,
}

impl JobContext {
    /// A connection for a handler; a pool that cannot give one is worth another attempt.
    pub async fn connection(&self) -> Result<PooledConnection, JobError> {
        self.pool.get().await.map_err(JobError::database)
    }
}
