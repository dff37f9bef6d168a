//! Test support (feature `test-support`): real PostgreSQL and Redis, isolated per test.
//!
//! `scripts/test` starts throwaway servers and exports `QUIRE_TEST_DATABASE_URL` (a
//! superuser URL of the maintenance database), `QUIRE_TEST_REDIS_URL` and the shared
//! SeaweedFS's `QUIRE_TEST_S3_ENDPOINT` (with `QUIRE_TEST_S3_BUCKET` and its keys). Each
//! test gets its own database, cloned from a migrated template, its own Redis key
//! namespace and its own storage: a folder, or with `QUIRE_TEST_STORAGE=s3` a prefix of
//! its own in the shared bucket. So tests run in parallel.
//!
//! What the tests of every crate need lives here once: the per-test context, waiting for
//! a job, pushing to and draining a list, a started service's drain handle, a deletion
//! request signed as v1 signed it, and (with `fault-injection`) the fault oracle. The
//! library cannot start a worker or a dispatcher, so each crate's own harness adds only
//! what starts its binaries.

mod database;
mod intake;
mod legacy_signing;
#[cfg(feature = "fault-injection")]
mod oracle;
mod postgres_server;
mod queues;
mod redis_cluster;
mod redis_server;
mod seaweed_server;
mod service;
mod wait;

use std::collections::HashMap;
use std::ffi::OsString;
use std::time::Duration;

use tempfile::TempDir;
use uuid::Uuid;

pub use database::TestDatabase;
pub use intake::analysis_intake;
pub use legacy_signing::signed_as_v1;
#[cfg(feature = "fault-injection")]
pub use oracle::{create_oracle_tables, enqueue_fault_jobs, enqueue_fault_jobs_in, started_runs};
pub use postgres_server::PostgresServer;
pub use redis_cluster::RedisCluster;
pub use redis_server::{RedisServer, RedisTls, free_port};
pub use seaweed_server::{
    SeaweedServer, TEST_S3_ACCESS_KEY_ID, TEST_S3_BUCKET, TEST_S3_SECRET_ACCESS_KEY,
};
pub use service::RunningService;
pub use wait::{await_lock_wait, eventually, within};

use crate::config::{
    Profile, S3Settings, Settings, SettingsSource, StorageBackend, workspace_config_dir,
};
use crate::secret::Secret;
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

/// Whether this run's contexts store on S3 (`QUIRE_TEST_STORAGE=s3`, which scripts/test
/// sets for the second pass of the document flows) rather than in a local folder.
pub fn s3_requested() -> bool {
    match std::env::var("QUIRE_TEST_STORAGE").as_deref() {
        Ok("s3") => true,
        Ok("local") | Err(_) => false,
        Ok(other) => panic!("QUIRE_TEST_STORAGE={other:?}: expected local or s3"),
    }
}

/// The S3 backend on the suite's shared SeaweedFS (scripts/test starts it), under
/// `prefix` of its one bucket.
pub fn shared_s3_settings(prefix: &str) -> S3Settings {
    let variable =
        |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
    let mut settings = test_settings(&[]).storage.s3;
    settings.endpoint = required_env("QUIRE_TEST_S3_ENDPOINT");
    settings.bucket = variable("QUIRE_TEST_S3_BUCKET", TEST_S3_BUCKET);
    settings.access_key_id = variable("QUIRE_TEST_S3_ACCESS_KEY_ID", TEST_S3_ACCESS_KEY_ID);
    settings.secret_access_key = Secret::new(variable(
        "QUIRE_TEST_S3_SECRET_ACCESS_KEY",
        TEST_S3_SECRET_ACCESS_KEY,
    ));
    settings.path_style = true;
    settings.prefix = prefix.to_owned();
    settings
}

/// One test's world: its database, Redis namespace, storage (a folder, or a prefix of
/// the shared bucket) and settings.
pub struct TestContext {
    pub settings: Settings,
    pub database: TestDatabase,
    pub namespace: String,
    /// The local backend's folder (made in both modes; unused on S3).
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
        let mut context = Self {
            settings,
            database,
            namespace,
            data_dir,
        };
        if s3_requested() {
            // The namespace is unique per test: its name is the test's prefix too.
            let prefix = context.namespace.clone();
            context.use_s3(shared_s3_settings(&prefix));
        }
        context
    }

    /// Switches this context (and the processes started from `process_env`) to the S3
    /// backend with `s3` (a private `SeaweedServer`'s, or the shared one's).
    pub fn use_s3(&mut self, s3: S3Settings) {
        self.settings.storage.backend = StorageBackend::S3;
        self.settings.storage.s3 = s3;
    }

    /// Whether this context stores on S3.
    pub fn on_s3(&self) -> bool {
        self.settings.storage.backend == StorageBackend::S3
    }

    /// The object store of this context's settings, as every process builds it.
    pub fn store(&self) -> std::sync::Arc<dyn crate::storage::ObjectStore> {
        crate::storage::build(&self.settings.storage).expect("object store")
    }

    /// Whether the object `key` (a storage key as rows hold it) is stored: what a test
    /// means when it looked for a file under `data_dir`, on either backend.
    pub async fn is_stored(&self, key: &str) -> bool {
        let key = crate::storage::StorageKey::from_stored(key).expect("a plain storage key");
        match self.store().open(&key).await {
            Ok(_) => true,
            Err(crate::storage::StorageError::NotFound) => false,
            Err(error) => panic!("storage failed: {error}"),
        }
    }

    /// Every key of this context's store, in key order (staging objects included).
    pub async fn stored_keys(&self) -> Vec<String> {
        self.stored_objects()
            .await
            .into_iter()
            .map(|object| object.key)
            .collect()
    }

    /// Every object of this context's store with its size, in key order.
    pub async fn stored_objects(&self) -> Vec<crate::storage::ListedObject> {
        let store = self.store();
        let mut objects: Vec<crate::storage::ListedObject> = Vec::new();
        loop {
            let after = objects.last().map(|object| object.key.clone());
            let page = store
                .list_after(after.as_deref(), 1000)
                .await
                .expect("list the store");
            if page.is_empty() {
                return objects;
            }
            objects.extend(page);
        }
    }

    /// Replaces the object `key` with `bytes` (a test damaging or repairing storage).
    pub async fn overwrite_stored(&self, key: &str, bytes: &[u8]) {
        let key = crate::storage::StorageKey::from_stored(key).expect("a plain storage key");
        let body = futures_util::stream::once(futures_util::future::ready(Ok(
            bytes::Bytes::copy_from_slice(bytes),
        )));
        self.store()
            .put(&key, Box::pin(body))
            .await
            .expect("overwrite a stored object");
    }

    /// Removes the object `key` (a test losing storage).
    pub async fn remove_stored(&self, key: &str) {
        let key = crate::storage::StorageKey::from_stored(key).expect("a plain storage key");
        self.store()
            .delete(&key)
            .await
            .expect("remove a stored object");
    }

    /// The environment that points a Quire binary at this context's database, Redis
    /// namespace and storage (folder or S3 prefix), in the test profile: what a test sets on a child
    /// process (see `crate::process`) to make it part of this test's world.
    pub fn process_env(&self) -> Vec<(&'static str, OsString)> {
        let s3 = &self.settings.storage.s3;
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
            (
                "QUIRE__STORAGE__BACKEND",
                match self.settings.storage.backend {
                    StorageBackend::Local => "local",
                    StorageBackend::S3 => "s3",
                }
                .into(),
            ),
            ("QUIRE__STORAGE__S3__ENDPOINT", s3.endpoint.clone().into()),
            ("QUIRE__STORAGE__S3__BUCKET", s3.bucket.clone().into()),
            (
                "QUIRE__STORAGE__S3__PATH_STYLE",
                s3.path_style.to_string().into(),
            ),
            (
                "QUIRE__STORAGE__S3__ACCESS_KEY_ID",
                s3.access_key_id.clone().into(),
            ),
            (
                "QUIRE__STORAGE__S3__SECRET_ACCESS_KEY",
                s3.secret_access_key.expose().into(),
            ),
            ("QUIRE__STORAGE__S3__PREFIX", s3.prefix.clone().into()),
            // Empty unless the test's Redis speaks TLS with its own CA.
            (
                "QUIRE__REDIS__CA_FILE",
                self.settings.redis.ca_file.clone().into(),
            ),
        ]
    }

    /// The folder of the local store, when [`TestContext::store`] is local (`None` on
    /// another backend): for the few tests of what only a local store has (staging
    /// files, file times).
    pub fn local_store_root(&self) -> Option<&std::path::Path> {
        (!self.on_s3()).then_some(self.settings.storage.data_dir.as_path())
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
