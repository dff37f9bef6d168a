//! The fleet on its hosts: PostgreSQL, Redis and SeaweedFS on `infra` (SeaweedFS on a
//! network card of its own, the storage network, so the test can cut storage alone),
//! the API on `api`, a dispatcher and a worker on each of `host-1` and `host-2`. Every
//! process is a built binary, a child of the test, run in its host's namespace, with a
//! folder of its own (its temp dir, and the local storage folder nothing else reads): the
//! API and the workers meet only through PostgreSQL, Redis and S3.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::Text;
use diesel_async::RunQueryDsl;
use quire_shared::db::PgPool;
use quire_shared::process::{Launch, QuireProcess};
use quire_shared::test_support::{
    PostgresServer, RedisServer, TestContext, TestDatabase, eventually,
};
use tempfile::TempDir;
use uuid::Uuid;

use super::net::Network;
use super::seaweed::Seaweed;

pub const INFRA: &str = "infra";
pub const API: &str = "api";
pub const HOST_1: &str = "host-1";
pub const HOST_2: &str = "host-2";
/// The port the API listens on in its own namespace (nothing else there to clash with).
const API_PORT: u16 = 8080;

pub struct Fleet {
    pub context: TestContext,
    pub pool: PgPool,
    pub tenant_id: Uuid,
    pub token: String,
    /// `http://<api host>:8080`, reached over the test network.
    pub api_url: String,
    pub seaweed: Seaweed,
    /// Address of each host's first interface.
    pub addresses: BTreeMap<&'static str, Ipv4Addr>,
    children: BTreeMap<String, QuireProcess>,
    /// Each process's own folder, kept over restarts.
    homes: BTreeMap<String, TempDir>,
    logs: TempDir,
    _redis: RedisServer,
    _postgres: PostgresServer,
    /// Last: its drop kills whatever still runs in the namespaces and removes them.
    pub net: Network,
}

/// The host of each process of the fleet.
pub const PROCESSES: [(&str, &str); 5] = [
    ("api", API),
    ("dispatcher-1", HOST_1),
    ("worker-1", HOST_1),
    ("dispatcher-2", HOST_2),
    ("worker-2", HOST_2),
];

fn binary_of(name: &str) -> &'static str {
    if name.starts_with("worker") {
        "quire-worker"
    } else if name.starts_with("dispatcher") {
        "quire-dispatcher"
    } else {
        "quire-api"
    }
}

impl Fleet {
    /// The network, its servers, a tenant; no Quire process yet.
    pub async fn new() -> Self {
        let mut net = Network::new();
        let mut addresses = BTreeMap::new();
        for host in [INFRA, API, HOST_1, HOST_2] {
            addresses.insert(host, net.add_host(host));
        }
        let storage_address = net.add_interface(INFRA);
        let infra_netns = net.host(INFRA).netns.clone();
        let infra = IpAddr::V4(addresses[INFRA]);
        let postgres = PostgresServer::start_in_netns(&infra_netns, infra, &net.cidr());
        let redis = RedisServer::start_in_netns(&infra_netns, infra).await;
        let seaweed = Seaweed::start(&infra_netns, storage_address).await;
        // The test process is a client on the same network (the bridge's address): it
        // migrates, provisions and checks through the infra host's address too.
        let database = TestDatabase::create_on(&postgres.admin_url()).await;
        let context = TestContext::with_servers(database, &redis.url());
        let pool = context.pool();
        let (tenant_id, token) = context
            .provisioned_tenant("fleet-tenant", Uuid::now_v7())
            .await;
        Self {
            pool,
            tenant_id,
            token,
            api_url: format!("http://{}:{API_PORT}", addresses[API]),
            seaweed,
            addresses,
            children: BTreeMap::new(),
            homes: BTreeMap::new(),
            logs: tempfile::tempdir().expect("log folder"),
            _redis: redis,
            _postgres: postgres,
            context,
            net,
        }
    }

    /// Starts the api, then both dispatchers and workers, and waits for the api.
    pub async fn start_all(&mut self) {
        for (name, _) in PROCESSES {
            self.spawn(name);
        }
        let url = format!("{}/readyz", self.api_url);
        let http = reqwest::Client::new();
        eventually(Duration::from_secs(30), "the api is ready", || async {
            let response = http.get(&url).send().await.ok()?;
            response.status().is_success().then_some(())
        })
        .await;
        self.assert_alive();
    }

    /// What every process of the fleet runs with: the test context's database and Redis
    /// (on the infra host), S3 on the storage network, and the fleet's retry policy.
    fn environment(&self, home: &std::path::Path) -> Vec<(&'static str, OsString)> {
        let mut env = self.context.process_env();
        env.retain(|(key, _)| *key != "QUIRE__STORAGE__DATA_DIR");
        let documents = home.join("documents");
        let tmp = home.join("tmp");
        std::fs::create_dir_all(&tmp).expect("temp folder");
        env.extend([
            // Local storage nobody else reads: were S3 not used, nothing would be found.
            ("QUIRE__STORAGE__DATA_DIR", documents.into_os_string()),
            ("TMPDIR", tmp.into_os_string()),
            ("RUST_LOG", "info".into()),
            (
                "QUIRE__SERVER__HOST",
                self.addresses[API].to_string().into(),
            ),
            ("QUIRE__SERVER__PORT", API_PORT.to_string().into()),
            // A worker host cut off for a while, or storage gone for 10 s, costs a few
            // attempts (each rescue counts one); the budget outlasts both.
            ("QUIRE__JOBS__MAX_ATTEMPTS", "30".into()),
            ("QUIRE__WORKER__RETRY_BACKOFF_MAX_MS", "2000".into()),
            // A dispatcher cut off mid-publish leaves claims the other one recovers.
            ("QUIRE__DISPATCHER__CLAIM_TIMEOUT_SECONDS", "5".into()),
            // Eight clients upload 1,000 documents; on a quiet machine they pass the
            // default enqueue rate (100/s after a burst of 500) and met 429s, which are
            // not what this suite is about (tests/it/enqueue_limit.rs is).
            ("QUIRE__ENQUEUE_LIMIT__PER_SECOND", "0".into()),
        ]);
        env.extend(self.seaweed.process_env());
        env
    }

    /// Starts (or restarts) process `name` in its host's namespace.
    pub fn spawn(&mut self, name: &str) {
        let host = PROCESSES
            .iter()
            .find(|(process, _)| *process == name)
            .map(|(_, host)| *host)
            .unwrap_or_else(|| panic!("no process {name}"));
        let home = self
            .homes
            .entry(name.to_owned())
            .or_insert_with(|| tempfile::tempdir().expect("process folder"))
            .path()
            .to_owned();
        let child = Launch::in_netns(binary_of(name), &self.net.host(host).netns)
            .unwrap_or_else(|error| panic!("{error}"))
            .clean_env()
            .envs(self.environment(&home))
            .current_dir(&home)
            .log_to(&self.logs.path().join(format!("{name}.log")))
            .expect("log file")
            .spawn()
            .expect("start a quire binary");
        self.children.insert(name.to_owned(), child);
    }

    /// Every started process still runs.
    pub fn assert_alive(&mut self) {
        let dead: Vec<String> = self
            .children
            .iter_mut()
            .filter_map(|(name, child)| (!child.is_running()).then(|| name.clone()))
            .collect();
        assert!(dead.is_empty(), "processes exited on their own: {dead:?}");
    }

    /// The worker id process `name` (a worker) reports itself under, once it has.
    pub async fn worker_id(&self, name: &str) -> String {
        #[derive(QueryableByName)]
        struct Id {
            #[diesel(sql_type = Text)]
            id: String,
        }
        let pid = self.children[name].id().expect("the worker runs");
        let pid = i32::try_from(pid).expect("a pid fits");
        eventually(
            Duration::from_secs(30),
            &format!("{name} reports itself"),
            || async {
                let mut conn = self.pool.get().await.ok()?;
                diesel::sql_query("SELECT id FROM workers WHERE pid = $1")
                    .bind::<diesel::sql_types::Int4, _>(pid)
                    .get_result::<Id>(&mut conn)
                    .await
                    .ok()
                    .map(|row| row.id)
            },
        )
        .await
    }
}

impl Fleet {
    /// The fleet's object store as the test process sees it (over the storage network).
    pub fn store(&self) -> std::sync::Arc<dyn quire_shared::storage::ObjectStore> {
        let env: Vec<(&str, String)> = self
            .seaweed
            .process_env()
            .into_iter()
            .map(|(key, value)| (key, value.to_string_lossy().into_owned()))
            .collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let mut settings = quire_shared::test_support::test_settings(&env);
        // The fleet's processes give up on storage fast (the outage must answer 503
        // while it lasts); the checks run after it, on a loaded machine, and wait.
        let s3 = &mut settings.storage.s3;
        s3.request_timeout_ms = 60_000;
        s3.max_retries = 5;
        s3.retry_timeout_ms = 60_000;
        quire_shared::storage::build(&settings.storage).expect("the fleet's object store")
    }
}

impl Drop for Fleet {
    /// A failing scenario shows the end of every process's log: CI keeps nothing else.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let Ok(entries) = std::fs::read_dir(self.logs.path()) else {
            return;
        };
        for entry in entries.flatten() {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            // The warnings and errors first (a 503's cause is logged once, maybe long
            // before the end), then the end.
            let tail_from = lines.len().saturating_sub(20);
            let warnings: Vec<&str> = lines[..tail_from]
                .iter()
                .copied()
                .filter(|line| line.contains("WARN") || line.contains("ERROR"))
                .collect();
            let warnings = &warnings[warnings.len().saturating_sub(20)..];
            eprintln!(
                "--- {} (its last {} warnings and errors, then its last {} lines)",
                entry.path().display(),
                warnings.len(),
                lines.len() - tail_from
            );
            for line in warnings.iter().chain(&lines[tail_from..]) {
                eprintln!("{line}");
            }
        }
    }
}
