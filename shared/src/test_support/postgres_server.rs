//! A private PostgreSQL cluster for fault tests that stop and restart the database
//! without disturbing the tests sharing the suite's server, and for the TLS tests (a
//! server that accepts TLS connections only, with the test's certificate). As root the
//! server runs as the `postgres` user (PostgreSQL refuses to run as root).

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

pub struct PostgresServer {
    pub port: u16,
    dir: TempDir,
    bin: PathBuf,
    /// More `-c` options (TLS).
    options: String,
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
        let server = Self::init();
        server.start_again();
        server
    }

    /// A cluster that accepts only TLS connections (`hostssl` lines alone in
    /// pg_hba.conf), serving the PEM certificate chain `cert` with its key `key`.
    pub fn start_tls(cert: &Path, key: &Path) -> Self {
        let mut server = Self::init();
        let data = server.data_dir();
        std::fs::copy(cert, data.join("server.crt")).expect("copy the server certificate");
        std::fs::copy(key, data.join("server.key")).expect("copy the server key");
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostssl all all ::1/128 trust\n",
        )
        .expect("write pg_hba.conf");
        // PostgreSQL refuses a key others can read, or one it does not own.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            data.join("server.key"),
            std::fs::Permissions::from_mode(0o600),
        )
        .expect("chmod the server key");
        if running_as_root() {
            let status = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(data.join("server.crt"))
                .arg(data.join("server.key"))
                .arg(data.join("pg_hba.conf"))
                .status()
                .expect("chown the tls files");
            assert!(status.success(), "chown failed");
        }
        server.options = "-c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key".into();
        server.start_again();
        server
    }

    fn init() -> Self {
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
            options: String::new(),
        };
        let status = pg_command(&server.bin.join("initdb"))
            .arg("-D")
            .arg(server.data_dir())
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"])
            .stdout(std::process::Stdio::null())
            .status()
            .expect("run initdb");
        assert!(status.success(), "initdb failed");
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
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=off -c max_connections=200 {}",
            self.port,
            self.dir.path().display(),
            self.options
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
