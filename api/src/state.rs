//! What every handler shares.

use std::sync::Arc;

use quire_shared::config::Settings;
use quire_shared::db::PgPool;
use quire_shared::storage::ObjectStore;

pub struct AppState {
    pub settings: Arc<Settings>,
    pub pool: PgPool,
    pub store: Arc<dyn ObjectStore>,
    pub redis: quire_shared::redis_client::RedisPool,
}
