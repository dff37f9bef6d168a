//! A private `redis-server` for fault tests that stop and restart Redis without
//! disturbing the tests that share the suite's server.

use std::process::Stdio;
use std::time::Duration;

use tempfile::TempDir;
use tokio::process::{Child, Command};

use super::eventually;

pub struct RedisServer {
    pub port: u16,
    dir: TempDir,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server on a free loopback port and waits until it answers.
    pub async fn start() -> Self {
        let port = free_port();
        let dir = tempfile::tempdir().expect("redis folder");
        let mut server = Self {
            port,
            dir,
            child: None,
        };
        server.spawn().await;
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL): whatever it held in memory is gone.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().await.expect("kill redis-server");
        }
    }

    /// Starts the server again on the same port, empty.
    pub async fn restart(&mut self) {
        self.kill().await;
        self.spawn().await;
    }

    async fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start redis-server (scripts/test installs it)");
        self.child = Some(child);
        let url = self.url();
        wait_for_ping(&url, "private redis answers PING").await;
    }
}

pub fn free_port() -> u16 {
    crate::process::free_port().expect("find a free port")
}

/// Waits (10 s at most) until the Redis at `url` answers PING.
pub(super) async fn wait_for_ping(url: &str, what: &str) {
    eventually(Duration::from_secs(10), what, || async move {
        let client = deadpool_redis::redis::Client::open(url).ok()?;
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        deadpool_redis::redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .ok()
    })
    .await;
}
