//! A private PostgreSQL cluster for fault tests that stop and restart the database
//! without disturbing the tests sharing the suite's server, and for the TLS tests (a
//! server that accepts TLS connections only, with the test's certificate), and for the
//! database host of the multi-host test (inside a network namespace). As root the server
//! runs as the `postgres` user (PostgreSQL refuses to run as root).

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

pub struct PostgresServer {
    pub port: u16,
    dir: TempDir,
    bin: PathBuf,
    /// More `-c` options (TLS).
    options: String,
    /// The address it listens on (loopback unless it runs on a host of a test network).
    listen: IpAddr,
    /// The network namespace it runs in (the multi-host test's infrastructure host).
    netns: Option<String>,
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|output| output.stdout.starts_with(b"0\n"))
        .unwrap_or(false)
}

/// Runs a PostgreSQL tool as the cluster's owner, inside `netns` if given (pg_ctl's
/// server then lives in that namespace: a namespace is inherited by every child).
fn pg_command(tool: &Path, netns: Option<&str>) -> Command {
    let mut command = match netns {
        Some(netns) => {
            let mut command = Command::new("ip");
            command.args(["netns", "exec", netns]);
            command
        }
        None => return plain_pg_command(tool),
    };
    if running_as_root() {
        command.args(["runuser", "-u", "postgres", "--"]);
    }
    command.arg(tool);
    command
}

fn plain_pg_command(tool: &Path) -> Command {
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

    /// A cluster inside the network namespace `netns`, listening on `address` (one of
    /// the namespace's own) and trusting clients from the network `clients` (CIDR): the
    /// database host of the multi-host test.
    pub fn start_in_netns(netns: &str, address: IpAddr, clients: &str) -> Self {
        let mut server = Self::init();
        server.listen = address;
        server.netns = Some(netns.to_owned());
        let hba = server.data_dir().join("pg_hba.conf");
        let mut lines = std::fs::read_to_string(&hba).expect("read pg_hba.conf");
        lines.push_str(&format!("host all all {clients} trust\n"));
        std::fs::write(&hba, lines).expect("write pg_hba.conf");
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
            listen: IpAddr::V4(Ipv4Addr::LOCALHOST),
            netns: None,
        };
        let status = plain_pg_command(&server.bin.join("initdb"))
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
        format!("postgres://postgres@{}:{}/postgres", self.listen, self.port)
    }

    fn pg_ctl(&self, args: &[&str]) {
        let options = format!(
            "-c listen_addresses={} -p {} -k {} -c fsync=off -c max_connections=200 {}",
            self.listen,
            self.port,
            self.dir.path().display(),
            self.options
        );
        let status = pg_command(&self.bin.join("pg_ctl"), self.netns.as_deref())
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
        let _ = plain_pg_command(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.data_dir())
            .args(["-m", "immediate", "stop"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}
