//! PostgreSQL access: the pool, embedded migrations, the schema, and one storage module
//! per concern with every SQL statement of that concern behind a named function.

pub mod analysis;
pub mod assets;
pub mod documents;
pub mod jobs;
pub mod labels;
pub mod maintenance;
pub mod members;
pub mod migrate;
pub mod nonces;
pub mod outbox;
pub mod schema;
pub mod search_indexes;
pub mod stats;
pub mod tenant_data;
pub mod tenants;
pub mod workers;

use std::time::Duration;

use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::deadpool::{Object, Pool};

use crate::config::DatabaseSettings;

pub type PgPool = Pool<AsyncPgConnection>;
pub type PooledConnection = Object<AsyncPgConnection>;

/// The NOTIFY channel the API signals on commit and dispatchers LISTEN to.
pub const OUTBOX_CHANNEL: &str = "quire_outbox";

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("database query failed")]
    Query(#[from] diesel::result::Error),
    #[error("no database connection available")]
    Pool(#[from] diesel_async::pooled_connection::deadpool::PoolError),
    #[error("failed to build the database pool: {0}")]
    Build(String),
    #[error("failed to run migrations: {0}")]
    Migration(String),
}

impl DbError {
    /// A unique or exclusion constraint refused the write.
    pub fn is_unique_violation(&self) -> bool {
        matches!(
            self,
            Self::Query(diesel::result::Error::DatabaseError(
                diesel::result::DatabaseErrorKind::UniqueViolation,
                _
            ))
        )
    }
}

/// Builds a lazily connecting pool: processes start while PostgreSQL is still coming up
/// and report unreadiness instead of crashing.
pub fn build_pool(settings: &DatabaseSettings) -> Result<PgPool, DbError> {
    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new(settings.url.expose());
    let timeout = Duration::from_secs(settings.connect_timeout_seconds);
    Pool::builder(manager)
        .max_size(settings.pool_size)
        .wait_timeout(Some(timeout))
        .create_timeout(Some(timeout))
        .runtime(deadpool_runtime())
        .build()
        .map_err(|error| DbError::Build(error.to_string()))
}

fn deadpool_runtime() -> deadpool::Runtime {
    deadpool::Runtime::Tokio1
}

/// Checks that the database answers.
pub async fn ping(pool: &PgPool) -> Result<(), DbError> {
    use diesel_async::RunQueryDsl;
    let mut conn = pool.get().await?;
    diesel::sql_query("SELECT 1").execute(&mut conn).await?;
    Ok(())
}
