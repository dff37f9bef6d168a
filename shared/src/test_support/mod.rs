//! Test support (feature `test-support`): real PostgreSQL and Redis, isolated per test.
//!
//! `scripts/test` starts throwaway servers and exports `QUIRE_TEST_DATABASE_URL` (a
//! superuser URL of the maintenance database) and `QUIRE_TEST_REDIS_URL`. Each test gets
//! its own database, cloned from a migrated template, its own Redis key namespace and its
//! own storage folder, so tests run in parallel.
//!
//! What the tests of every crate need lives here once: the per-test context, waiting for
//! a job, pushing to and draining a list, a started service's drain handle, a deletion
//! request signed as v1 signed it, and (with `fault-injection`) the fault oracle. The
//! library cannot start a worker or a dispatcher, so each crate's own harness adds only
//! what starts its binaries.

mod database;
mod legacy_signing;
#[cfg(feature = "fault-injection")]
mod oracle;
mod postgres_server;
mod queues;
mod redis_cluster;
mod redis_server;
mod service;
mod wait;

use std::collections::HashMap;
use std::ffi::OsString;
use std::time::Duration;

use tempfile::TempDir;
use uuid::Uuid;

pub use database::TestDatabase;
pub use legacy_signing::signed_as_v1;
#[cfg(feature = "fault-injection")]
pub use oracle::{create_oracle_tables, enqueue_fault_jobs, enqueue_fault_jobs_in, started_runs};
pub use postgres_server::PostgresServer;
pub use redis_cluster::RedisCluster;
pub use redis_server::{RedisServer, RedisTls, free_port};
pub use service::RunningService;
pub use wait::eventually;

use crate::config::{Profile, Settings, SettingsSource, workspace_config_dir};
use crate::states::JobStatus;

/// How long a test waits for what a running system does at once (a publish, a claim, a
/// run): long enough for a loaded 2-core machine, short enough to fail a hung test.
pub const DEADLINE: Duration = Duration::from_secs(30);

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

    /// The environment that points a Quire binary at this context's database, Redis
    /// namespace and storage folder, in the test profile: what a test sets on a child
    /// process (see `crate::process`) to make it part of this test's world.
    pub fn process_env(&self) -> Vec<(&'static str, OsString)> {
        vec![
            ("QUIRE_ENV", "test".into()),
            ("QUIRE_CONFIG_DIR", workspace_config_dir().into()),
            ("DATABASE_URL", self.settings.database.url.expose().into()),
            ("REDIS_URL", self.settings.redis.url.expose().into()),
            (
                "QUIRE__REDIS__NAMESPACE",
                self.settings.redis.namespace.clone().into(),
            ),
            (
                "QUIRE__STORAGE__DATA_DIR",
                self.settings.storage.data_dir.clone().into(),
            ),
            // Empty unless the test's Redis speaks TLS with its own CA.
            (
                "QUIRE__REDIS__CA_FILE",
                self.settings.redis.ca_file.clone().into(),
            ),
        ]
    }

    /// A pool on this test's database.
    pub fn pool(&self) -> crate::db::PgPool {
        crate::db::build_pool(&self.settings.database).expect("database pool")
    }

    /// An active tenant as provisioning leaves it (index, capability sets), with `owner`
    /// as its owner, made directly so that tests need no worker; returns its id and a
    /// token of the owner. Provisioning itself is tested end to end on its own.
    pub async fn provisioned_tenant(&self, name: &str, owner: Uuid) -> (Uuid, String) {
        use crate::db::{members, search_indexes, tenants};
        use crate::permissions::MemberSpec;
        let pool = self.pool();
        let mut conn = pool.get().await.expect("connection");
        let tenant = tenants::create_tenant(&mut conn, name, crate::states::TenantStatus::Active)
            .await
            .expect("create tenant");
        search_indexes::ensure(&mut conn, tenant.id, &self.settings.search.language)
            .await
            .expect("search index");
        members::materialize(&mut conn, tenant.id, &[MemberSpec::User(owner)])
            .await
            .expect("members");
        (tenant.id, self.token_for(tenant.id, owner))
    }

    /// A token of `user` in `tenant_id`, valid for an hour.
    pub fn token_for(&self, tenant_id: Uuid, user: Uuid) -> String {
        crate::auth::mint(
            &self.settings.auth,
            tenant_id,
            user,
            std::time::Duration::from_secs(3600),
        )
        .expect("mint token")
    }

    /// An operator token for the admin routes.
    pub fn operator_token(&self) -> String {
        crate::auth::mint_admin(
            &self.settings.auth,
            "test-operator",
            std::time::Duration::from_secs(3600),
        )
        .expect("mint operator token")
    }
}

/// The job `job_id`, which must exist.
pub async fn job(pool: &crate::db::PgPool, job_id: Uuid) -> crate::db::jobs::Job {
    let mut conn = pool.get().await.expect("connection");
    crate::db::jobs::find_job(&mut conn, job_id)
        .await
        .expect("query job")
        .expect("job exists")
}

/// Waits until the job `job_id` reaches `status`, failing fast if it ends in another
/// terminal state (a job that failed will never succeed: no need to wait the deadline).
pub async fn wait_for_job(
    pool: &crate::db::PgPool,
    job_id: Uuid,
    status: JobStatus,
) -> crate::db::jobs::Job {
    eventually(DEADLINE, &format!("job {job_id} is {status}"), || async {
        let job = job(pool, job_id).await;
        if job.status != status && job.status.is_terminal() {
            panic!(
                "job ended {} ({:?}), expected {status}",
                job.status, job.error_code
            );
        }
        (job.status == status).then_some(job)
    })
    .await
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
