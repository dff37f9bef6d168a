//! The stack under test as child processes of the test.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use quire_shared::db::PgPool;
use quire_shared::jobs::FaultTest;
use quire_shared::process::{Launch, QuireProcess};
use quire_shared::test_support::{
    TestContext, create_oracle_tables, enqueue_fault_jobs, eventually,
};
use uuid::Uuid;

pub struct Stack {
    pub context: TestContext,
    pub pool: PgPool,
    pub tenant_id: Uuid,
    pub token: String,
    pub api_port: u16,
    children: BTreeMap<String, QuireProcess>,
    log_dir: PathBuf,
}

pub const WORKERS: [&str; 3] = ["worker-1", "worker-2", "worker-3"];
pub const DISPATCHERS: [&str; 2] = ["dispatcher-1", "dispatcher-2"];

fn binary_of(name: &str) -> &'static str {
    if name.starts_with("worker") {
        "quire-worker"
    } else if name.starts_with("dispatcher") {
        "quire-dispatcher"
    } else {
        "quire-api"
    }
}

impl Stack {
    /// A tenant and the oracle tables in this context's database; no process yet.
    pub async fn new(context: TestContext) -> Self {
        let pool = context.pool();
        create_oracle_tables(&pool).await;
        let (tenant_id, token) = context
            .provisioned_tenant("fault-tenant", Uuid::now_v7())
            .await;
        let log_dir = context.data_dir.path().join("logs");
        std::fs::create_dir_all(&log_dir).expect("log folder");
        Self {
            pool,
            tenant_id,
            token,
            api_port: quire_shared::test_support::free_port(),
            children: BTreeMap::new(),
            log_dir,
            context,
        }
    }

    /// Starts 1 api, 2 dispatchers and 3 workers.
    pub async fn start_all(&mut self) {
        self.spawn("api", &[]);
        for name in DISPATCHERS {
            self.spawn(name, &[]);
        }
        for name in WORKERS {
            self.spawn(name, &[]);
        }
        self.wait_until_ready().await;
    }

    /// Every started process still runs (a bad binary or setting makes them exit at once).
    pub fn assert_alive(&mut self) {
        let dead: Vec<String> = self
            .children
            .iter_mut()
            .filter_map(|(name, child)| (!child.is_running()).then(|| name.clone()))
            .collect();
        assert!(dead.is_empty(), "processes exited on their own: {dead:?}");
    }

    /// Starts (or restarts) the process `name` (`api`, `dispatcher-*`, `worker-*`) with
    /// extra environment.
    pub fn spawn(&mut self, name: &str, extra: &[(&str, &str)]) {
        // The error's text says how to build a missing binary; `expect` would show only
        // its debug form.
        let child = Launch::new(binary_of(name))
            .unwrap_or_else(|error| panic!("{error}"))
            .clean_env()
            .envs(self.context.process_env())
            .env("QUIRE__SERVER__PORT", self.api_port.to_string())
            .env("RUST_LOG", "info")
            .envs(extra.iter().copied())
            .current_dir(self.context.data_dir.path())
            .log_to(&self.log_dir.join(format!("{name}.log")))
            .expect("log file")
            .spawn()
            .expect("start a quire binary");
        self.children.insert(name.to_owned(), child);
    }

    /// Waits for the api's readiness, then checks that no process died on the way.
    pub async fn wait_until_ready(&mut self) {
        let url = format!("http://127.0.0.1:{}/readyz", self.api_port);
        let http = reqwest::Client::new();
        eventually(Duration::from_secs(30), "the api is ready", || async {
            let response = http.get(&url).send().await.ok()?;
            response.status().is_success().then_some(())
        })
        .await;
        self.assert_alive();
    }

    /// SIGKILL, and reap it.
    pub async fn kill(&mut self, name: &str) {
        if let Some(mut child) = self.children.remove(name) {
            child.kill().await;
        }
    }

    /// SIGTERM: the graceful way an orchestrator stops a process.
    pub fn terminate(&self, name: &str) {
        self.children[name].terminate().expect("send SIGTERM");
    }

    /// Waits for `name` to exit on its own and returns whether it did within `deadline`.
    pub async fn wait_exit(&mut self, name: &str, deadline: Duration) -> bool {
        let Some(child) = self.children.get_mut(name) else {
            return true;
        };
        let exited = child.wait_exit(deadline).await;
        if exited {
            self.children.remove(name);
        }
        exited
    }

    /// True while `name` runs.
    pub fn is_running(&mut self, name: &str) -> bool {
        self.children
            .get_mut(name)
            .is_some_and(QuireProcess::is_running)
    }

    pub async fn enqueue(&self, count: usize, payload: FaultTest, max_attempts: i32) -> Vec<Uuid> {
        enqueue_fault_jobs(&self.pool, self.tenant_id, count, payload, max_attempts).await
    }
}

impl Drop for Stack {
    /// A failing scenario shows the end of every child's log: CI keeps nothing else.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let Ok(entries) = std::fs::read_dir(&self.log_dir) else {
            return;
        };
        for entry in entries.flatten() {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(40)..];
            eprintln!("--- {} (last {} lines)", entry.path().display(), tail.len());
            for line in tail {
                eprintln!("{line}");
            }
        }
    }
}
