//! What every job run gets from the process running it.

use std::sync::Arc;

use crate::config::Settings;
use crate::db::PgPool;
use crate::storage::ObjectStore;

pub struct JobContext {
    /// The worker running the job (random per process start).
    pub worker_id: String,
    pub pool: PgPool,
    pub store: Arc<dyn ObjectStore>,
    pub settings: Arc<Settings>,
}
