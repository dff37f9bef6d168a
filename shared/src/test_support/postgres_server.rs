//! A private PostgreSQL cluster for fault tests that stop and restart the database
//! without disturbing the tests sharing the suite's server. As root the server runs as
//! the `postgres` user (PostgreSQL refuses to run as root).

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

pub struct PostgresServer {
    pub port: u16,
    dir: TempDir,
    bin: PathBuf,
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|output| output.stdout.starts_with(b"0\n"))
        .unwrap_or(false)
}

/// Runs a PostgreSQL tool as the cluster's owner.
fn pg_command(tool: &Path) -> Command {
    if running_as_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(tool);
        command
    } else {
        Command::new(tool)
    }
}

fn newest_bin_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("QUIRE_TEST_PG_BIN") {
        return PathBuf::from(dir);
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL server binaries under /usr/lib/postgresql (scripts/test installs them)")
        .filter_map(|entry| entry.ok().map(|entry| entry.path().join("bin")))
        .filter(|path| path.join("initdb").exists())
        .collect();
    dirs.sort_by_key(|path| {
        path.parent()
            .and_then(|version| version.file_name())
            .and_then(|name| name.to_str())
            .and_then(|name| name.parse::<u32>().ok())
            .unwrap_or(0)
    });
    dirs.pop().expect("no PostgreSQL server binaries found")
}

impl PostgresServer {
    /// Initialises and starts a cluster on a free loopback port.
    pub fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("quire-pg-")
            .tempdir()
            .expect("postgres folder");
        if running_as_root() {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("chown the cluster folder");
            assert!(status.success(), "chown failed");
        }
        let server = Self {
            port: super::redis_server::free_port(),
            bin: newest_bin_dir(),
            dir,
        };
        let status = pg_command(&server.bin.join("initdb"))
            .arg("-D")
            .arg(server.data_dir())
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"])
            .stdout(std::process::Stdio::null())
            .status()
            .expect("run initdb");
        assert!(status.success(), "initdb failed");
        server.start_again();
        server
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A superuser URL of the maintenance database.
    pub fn admin_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn pg_ctl(&self, args: &[&str]) {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=off -c max_connections=200",
            self.port,
            self.dir.path().display()
        );
        let status = pg_command(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(self.dir.path().join("server.log"))
            .args(["-o", &options, "-w", "-t", "60"])
            .args(args)
            .stdout(std::process::Stdio::null())
            .status()
            .expect("run pg_ctl");
        assert!(status.success(), "pg_ctl {args:?} failed");
    }

    /// Stops the server the way an operator's fast shutdown does: sessions are cut.
    pub fn stop(&self) {
        self.pg_ctl(&["-m", "fast", "stop"]);
    }

    pub fn start_again(&self) {
        self.pg_ctl(&["start"]);
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        let _ = pg_command(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.data_dir())
            .args(["-m", "immediate", "stop"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}
