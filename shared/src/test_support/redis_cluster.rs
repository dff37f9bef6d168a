//! A real three-master Redis Cluster on loopback ports (`redis-server --cluster-enabled
//! yes` and `redis-cli --cluster create`), for the test that runs Quire through one.

use std::process::Stdio;
use std::time::Duration;

use tempfile::TempDir;
use tokio::process::{Child, Command};

use super::redis_server::wait_for_ping;
use super::{eventually, free_port};

pub struct RedisCluster {
    pub ports: Vec<u16>,
    _dirs: Vec<TempDir>,
    _children: Vec<Child>,
}

/// A free port whose cluster bus port (port + 10000) is free too.
fn cluster_port() -> u16 {
    loop {
        let port = free_port();
        if port <= 55_000 && std::net::TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

impl RedisCluster {
    /// Starts three masters, joins them into a cluster and waits until it serves.
    pub async fn start() -> Self {
        let mut ports = Vec::new();
        while ports.len() < 3 {
            let port = cluster_port();
            if !ports.contains(&port) {
                ports.push(port);
            }
        }
        let mut dirs = Vec::new();
        let mut children = Vec::new();
        for port in &ports {
            let dir = tempfile::tempdir().expect("cluster node folder");
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args([
                    "--cluster-enabled",
                    "yes",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .args(["--cluster-config-file", "nodes.conf"])
                .arg("--dir")
                .arg(dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("start redis-server (scripts/test installs it)");
            children.push(child);
            dirs.push(dir);
        }
        for port in &ports {
            wait_for_ping(
                &format!("redis://127.0.0.1:{port}"),
                "a cluster node answers",
            )
            .await;
        }
        let nodes: Vec<String> = ports
            .iter()
            .map(|port| format!("127.0.0.1:{port}"))
            .collect();
        let status = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&nodes)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await
            .expect("run redis-cli --cluster create");
        assert!(status.success(), "redis-cli --cluster create failed");
        for port in &ports {
            eventually(
                Duration::from_secs(30),
                "the cluster is ok",
                || async move {
                    let client =
                        deadpool_redis::redis::Client::open(format!("redis://127.0.0.1:{port}"))
                            .ok()?;
                    let mut conn = client.get_multiplexed_async_connection().await.ok()?;
                    let info: String = deadpool_redis::redis::cmd("CLUSTER")
                        .arg("INFO")
                        .query_async(&mut conn)
                        .await
                        .ok()?;
                    info.contains("cluster_state:ok").then_some(())
                },
            )
            .await;
        }
        Self {
            ports,
            _dirs: dirs,
            _children: children,
        }
    }

    /// Seed node URLs, comma-separated as `QUIRE__REDIS__CLUSTER_URLS` takes them.
    pub fn urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|port| format!("redis://127.0.0.1:{port}"))
            .collect()
    }
}
