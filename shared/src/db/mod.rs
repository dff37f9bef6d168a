//! PostgreSQL access: the pool, embedded migrations, the schema, and one storage module
//! per concern with every SQL statement of that concern behind a named function.

pub mod analysis;
pub mod assets;
pub mod documents;
pub mod intake;
pub mod jobs;
pub mod labels;
pub mod maintenance;
pub mod members;
pub mod migrate;
pub mod nonces;
pub mod outbox;
pub mod prepared;
pub mod schema;
pub mod search_indexes;
pub mod stats;
pub mod tenant_data;
pub mod tenants;
pub mod workers;

use std::time::Duration;

use diesel_async::AsyncConnection;
use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};

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

/// How the connections of a pool commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitMode {
    /// The server's `synchronous_commit` (on): an acknowledged commit survives a crash.
    Durable,
    /// `synchronous_commit = off` for every session of the pool: a commit is
    /// acknowledged before its WAL reaches the disk, and a database crash may undo the
    /// last few hundred milliseconds of them. Only for a process all of whose writes a
    /// crash may undo without harm, because a later rule finds and repeats them: the
    /// dispatcher (claims time out, publishing twice is deduplicated by the worker's
    /// claim, the rescuer and the lost-message rule run again). WAL is flushed in order,
    /// so any later durable commit (an upload, a job's finish) makes these durable too.
    Relaxed,
}

/// Builds a lazily connecting pool: processes start while PostgreSQL is still coming up
/// and report unreadiness instead of crashing.
pub fn build_pool(settings: &DatabaseSettings) -> Result<PgPool, DbError> {
    build_pool_with(settings, CommitMode::Durable)
}

/// [`build_pool`] with the given commit mode.
pub fn build_pool_with(settings: &DatabaseSettings, mode: CommitMode) -> Result<PgPool, DbError> {
    let mut config = ManagerConfig::<AsyncPgConnection>::default();
    // The default (`Verified`) runs `SELECT 1` on every checkout: a round trip and a
    // commit per use, about a third of the worker's statements. A connection the server
    // closed is still dropped at checkout (`is_broken` sees the closed socket); one that
    // dies silently fails its next statement, which every caller handles as an error.
    config.recycling_method = RecyclingMethod::Fast;
    if mode == CommitMode::Relaxed {
        config.custom_setup = Box::new(|url| Box::pin(connect_relaxed(url.to_owned())));
    }
    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(
        settings.url.expose(),
        config,
    );
    let timeout = Duration::from_secs(settings.connect_timeout_seconds);
    Pool::builder(manager)
        .max_size(settings.pool_size)
        .wait_timeout(Some(timeout))
        .create_timeout(Some(timeout))
        .runtime(deadpool_runtime())
        .build()
        .map_err(|error| DbError::Build(error.to_string()))
}

async fn connect_relaxed(url: String) -> diesel::ConnectionResult<AsyncPgConnection> {
    use diesel_async::SimpleAsyncConnection;
    let mut conn = AsyncPgConnection::establish(&url).await?;
    conn.batch_execute("SET synchronous_commit = off")
        .await
        .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
    Ok(conn)
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
