//! Migrations embedded in the binary: `quire-admin migrate` needs neither libpq nor the
//! diesel CLI on the machine it runs on.

use diesel_async::{AsyncMigrationHarness, AsyncPgConnection};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};

use super::DbError;

pub const MIGRATIONS: EmbeddedMigrations = embed_migrations!("../migrations");

async fn harness(url: &str) -> Result<AsyncMigrationHarness<AsyncPgConnection>, DbError> {
    // The pools' connector: migrations honour the URL's sslmode too.
    let conn = super::connect(url)
        .await
        .map_err(|error| DbError::Migration(format!("failed to connect: {error}")))?;
    Ok(AsyncMigrationHarness::new(conn))
}

/// Applies every pending migration and returns the versions it applied. Needs a
/// multi-thread tokio runtime (the harness blocks in place).
pub async fn run_pending(url: &str) -> Result<Vec<String>, DbError> {
    let mut harness = harness(url).await?;
    let applied = harness
        .run_pending_migrations(MIGRATIONS)
        .map_err(|error| DbError::Migration(error.to_string()))?;
    Ok(applied.iter().map(ToString::to_string).collect())
}

/// Reverts every applied migration, newest first (for the down/up migration test).
pub async fn revert_all(url: &str) -> Result<usize, DbError> {
    let mut harness = harness(url).await?;
    let reverted = harness
        .revert_all_migrations(MIGRATIONS)
        .map_err(|error| DbError::Migration(error.to_string()))?;
    Ok(reverted.len())
}

#[derive(diesel::QueryableByName)]
struct AppliedVersion {
    #[diesel(sql_type = diesel::sql_types::Text)]
    version: String,
}

/// True when the database has every migration this binary knows (readiness). Plain async
/// SQL, so it is safe on any runtime, the API's single-threaded workers included.
pub async fn is_current(conn: &mut AsyncPgConnection) -> Result<bool, DbError> {
    use diesel::migration::MigrationSource;
    use diesel_async::RunQueryDsl;
    let known = MigrationSource::<diesel::pg::Pg>::migrations(&MIGRATIONS)
        .map_err(|error| DbError::Migration(error.to_string()))?;
    let applied: Vec<String> = diesel::sql_query("SELECT version FROM __diesel_schema_migrations")
        .load::<AppliedVersion>(conn)
        .await?
        .into_iter()
        .map(|row| row.version)
        .collect();
    Ok(known
        .iter()
        .all(|migration| applied.contains(&migration.name().version().to_string())))
}
