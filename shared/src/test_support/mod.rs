//! Test support (feature `test-support`): real PostgreSQL and Redis, isolated per test.
//!
//! `scripts/test` starts throwaway servers and exports `QUIRE_TEST_DATABASE_URL` (a
//! superuser URL of the maintenance database) and `QUIRE_TEST_REDIS_URL`. Each test gets
//! its own database, cloned from a migrated template, its own Redis key namespace and its
//! own storage folder, so tests run in parallel.

mod database;
mod postgres_server;
mod redis_server;
mod wait;

use std::collections::HashMap;

use tempfile::TempDir;
use uuid::Uuid;

pub use database::TestDatabase;
pub use postgres_server::PostgresServer;
pub use redis_server::{RedisServer, free_port};
pub use wait::eventually;

use crate::config::{Profile, Settings, SettingsSource, workspace_config_dir};

/// Reads a variable `scripts/test` sets, with a message that says how to get it.
pub fn required_env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: run the suite with scripts/test, which starts PostgreSQL and Redis"
        )
    })
}

pub fn shared_redis_url() -> String {
    required_env("QUIRE_TEST_REDIS_URL")
}

/// One test's world: its database, Redis namespace, storage folder and settings.
pub struct TestContext {
    pub settings: Settings,
    pub database: TestDatabase,
    pub namespace: String,
    pub data_dir: TempDir,
}

impl TestContext {
    /// A fresh database and namespace on the suite's shared Redis.
    pub async fn new() -> Self {
        Self::with_redis_url(&shared_redis_url()).await
    }

    /// A fresh database and namespace on the Redis at `redis_url` (a private server for
    /// fault tests).
    pub async fn with_redis_url(redis_url: &str) -> Self {
        Self::with_servers(TestDatabase::create().await, redis_url)
    }

    /// A context on the given database and Redis (private servers for fault tests).
    pub fn with_servers(database: TestDatabase, redis_url: &str) -> Self {
        let namespace = format!("quire-test-{}", Uuid::new_v4().simple());
        let data_dir = tempfile::tempdir().expect("create a storage folder");
        let settings = test_settings(&[
            ("DATABASE_URL", database.url.as_str()),
            ("REDIS_URL", redis_url),
            ("QUIRE__REDIS__NAMESPACE", namespace.as_str()),
            (
                "QUIRE__STORAGE__DATA_DIR",
                data_dir.path().to_str().expect("utf-8 temp path"),
            ),
        ]);
        Self {
            settings,
            database,
            namespace,
            data_dir,
        }
    }

    /// A pool on this test's database.
    pub fn pool(&self) -> crate::db::PgPool {
        crate::db::build_pool(&self.settings.database).expect("database pool")
    }
}

/// The test profile's settings with `env` on top.
pub fn test_settings(env: &[(&str, &str)]) -> Settings {
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Settings::from_source(&SettingsSource {
        config_dir: workspace_config_dir(),
        profile: Profile::Test,
        env,
    })
    .expect("test settings")
}
