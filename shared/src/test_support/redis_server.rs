//! A private `redis-server` for fault tests that stop and restart Redis without
//! disturbing the tests that share the suite's server, and for the TLS tests (a server
//! that speaks TLS only, with the test's certificate), and for the Redis host of the
//! multi-host test (inside a network namespace).

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tempfile::TempDir;
use tokio::process::{Child, Command};

use super::eventually;

pub struct RedisServer {
    pub port: u16,
    dir: TempDir,
    child: Option<Child>,
    tls: Option<RedisTls>,
    /// The address it binds (loopback unless it runs on a host of a test network).
    bind: IpAddr,
    /// The network namespace it runs in.
    netns: Option<String>,
}

/// The PEM files of a TLS-only server: its certificate chain and key, and the CA the
/// readiness check trusts.
#[derive(Clone)]
pub struct RedisTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
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
            tls: None,
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            netns: None,
        };
        server.spawn().await;
        server
    }

    /// A server inside the network namespace `netns`, bound to `address` (one of the
    /// namespace's own): the Redis host of the multi-host test.
    pub async fn start_in_netns(netns: &str, address: IpAddr) -> Self {
        let mut server = Self {
            port: free_port(),
            dir: tempfile::tempdir().expect("redis folder"),
            child: None,
            tls: None,
            bind: address,
            netns: Some(netns.to_owned()),
        };
        server.spawn().await;
        server
    }

    /// A server whose only port speaks TLS (`--port 0 --tls-port`), clients not
    /// asked for certificates.
    pub async fn start_tls(tls: RedisTls) -> Self {
        let mut server = Self {
            port: free_port(),
            dir: tempfile::tempdir().expect("redis folder"),
            child: None,
            tls: Some(tls),
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            netns: None,
        };
        server.spawn().await;
        server
    }

    /// `redis://127.0.0.1:<port>`, or `rediss://localhost:<port>` for a TLS server (the
    /// name its test certificate carries).
    pub fn url(&self) -> String {
        match self.tls {
            Some(_) => format!("rediss://localhost:{}", self.port),
            None => format!("redis://{}:{}", self.bind, self.port),
        }
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
        // `ip netns exec` replaces itself with redis-server: the kill reaches the server.
        let mut command = match &self.netns {
            Some(netns) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", netns, "redis-server"]);
                command
            }
            None => Command::new("redis-server"),
        };
        match &self.tls {
            None => {
                command.args(["--port", &self.port.to_string()]);
            }
            Some(tls) => {
                command
                    .args(["--port", "0", "--tls-port", &self.port.to_string()])
                    .arg("--tls-cert-file")
                    .arg(&tls.cert)
                    .arg("--tls-key-file")
                    .arg(&tls.key)
                    .args(["--tls-auth-clients", "no"]);
            }
        }
        let child = command
            .args([
                "--bind",
                &self.bind.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            // Clients of other hosts connect without a password (a test network).
            .args(["--protected-mode", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start redis-server (scripts/test installs it)");
        self.child = Some(child);
        let url = self.url();
        match &self.tls {
            None => wait_for_ping(&url, "private redis answers PING").await,
            Some(tls) => {
                let ca = std::fs::read(&tls.ca).expect("read the test CA");
                wait_for_tls_ping(&url, &ca).await;
            }
        }
    }
}

/// Waits (10 s at most) until the TLS server at `url` answers PING, trusting `ca`.
async fn wait_for_tls_ping(url: &str, ca: &[u8]) {
    use deadpool_redis::redis;
    crate::tls::provider();
    eventually(
        Duration::from_secs(10),
        "private tls redis answers PING",
        || async move {
            let certificates = redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(ca.to_vec()),
            };
            let client = redis::Client::build_with_tls(url, certificates).ok()?;
            let mut conn = client.get_multiplexed_async_connection().await.ok()?;
            redis::cmd("PING")
                .query_async::<String>(&mut conn)
                .await
                .ok()
        },
    )
    .await;
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
