//! What every handler shares.

use std::sync::Arc;

use quire_shared::actions::documents::DocumentCaller;
use quire_shared::config::Settings;
use quire_shared::db::{DbError, PgPool, PooledConnection};
use quire_shared::storage::ObjectStore;

use crate::error::ApiError;

pub struct AppState {
    pub settings: Arc<Settings>,
    pub pool: PgPool,
    pub store: Arc<dyn ObjectStore>,
    pub redis: quire_shared::redis_client::RedisPool,
    /// The express path (`scheduling.express`): an upload whose queue has no backlog
    /// publishes its own job's event after the commit. `None` when it is off.
    pub express: Option<Arc<quire_shared::publishing::Express>>,
    /// The open event streams of this process (`GET /api/events`).
    pub events: Arc<crate::events::EventHub>,
}

impl AppState {
    /// The caller of a document action: who, in which tenant, with this request's id
    /// and the configured attempt budget for the jobs it enqueues.
    pub fn document_caller(&self, caller: &crate::auth::Caller) -> DocumentCaller {
        DocumentCaller {
            tenant_id: caller.tenant_id,
            tenant_generation: caller.tenant_generation,
            user_id: caller.user_id,
            configured_attempts: self.settings.jobs.max_attempts,
            request_id: crate::request_id::current(),
        }
    }

    /// A database connection for one request; a pool that cannot give one answers 503.
    pub async fn connection(&self) -> Result<PooledConnection, ApiError> {
        Ok(self.pool.get().await.map_err(DbError::from)?)
    }
}
