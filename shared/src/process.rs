//! Quire's own binaries as child processes: the one launcher of the benchmark's stack
//! and of the fault suite's. It finds a binary beside the running executable, starts it
//! with the caller's environment overrides and its output in a log file (or nowhere),
//! and stops it the ways an orchestrator does: SIGKILL, or SIGTERM and a wait.
//!
//! It lives in the library, not behind `test-support`: `quire-bench` is an operator's
//! tool, and a feature it enabled would, by cargo's feature unification, compile the
//! test helpers into every binary of a workspace build.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("cannot find the running executable's path")]
    OwnPath(#[source] std::io::Error),
    #[error(
        "{} is missing: build every binary first (cargo build --bins; scripts/test and scripts/bench do)",
        .0.display()
    )]
    Missing(PathBuf),
    #[error("cannot open the log file {}", path.display())]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to start {binary}")]
    Spawn {
        binary: String,
        source: std::io::Error,
    },
    #[error("{binary} has already exited")]
    Exited { binary: String },
    #[error("failed to signal {binary}")]
    Signal {
        binary: String,
        source: nix::errno::Errno,
    },
    #[error("no free loopback port")]
    NoPort(#[source] std::io::Error),
}

/// The path of the workspace binary `name` (e.g. `quire-worker`): cargo puts every binary
/// of a build in one folder (`target/<profile>`), beside the running one, or one level
/// above it when the running one is a test (`target/<profile>/deps`).
pub fn binary_path(name: &str) -> Result<PathBuf, ProcessError> {
    let exe = std::env::current_exe().map_err(ProcessError::OwnPath)?;
    let mut dir = exe.parent().unwrap_or_else(|| Path::new("."));
    if dir.file_name() == Some(OsStr::new("deps")) {
        dir = dir.parent().unwrap_or(dir);
    }
    let path = dir.join(name);
    if !path.exists() {
        return Err(ProcessError::Missing(path));
    }
    Ok(path)
}

/// A loopback port free at the time of asking, for a child process to listen on.
pub fn free_port() -> Result<u16, ProcessError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(ProcessError::NoPort)
}

/// A Quire binary about to be started: stdin closed, output discarded unless
/// [`Launch::log_to`] names a file, killed when its [`QuireProcess`] is dropped (a failed
/// bench or test leaves nothing running).
pub struct Launch {
    binary: String,
    command: Command,
}

impl Launch {
    /// The workspace binary `binary`, with the caller's environment.
    pub fn new(binary: &str) -> Result<Self, ProcessError> {
        Ok(Self::with_command(
            binary,
            Command::new(binary_path(binary)?),
        ))
    }

    /// The workspace binary `binary` inside the network namespace `netns`, through
    /// `ip netns exec` (root only). `ip` replaces itself with the binary (it forks only in
    /// batch mode), so the process id, the signals and the kill on drop are the binary's
    /// own. The multi-host test runs each "host" of a fleet this way.
    pub fn in_netns(binary: &str, netns: &str) -> Result<Self, ProcessError> {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", netns])
            .arg(binary_path(binary)?);
        Ok(Self::with_command(binary, command))
    }

    fn with_command(binary: &str, mut command: Command) -> Self {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        Self {
            binary: binary.to_owned(),
            command,
        }
    }

    /// Nothing of the caller's environment but `PATH`: the process sees only what the
    /// caller sets, never a stray `QUIRE__…` of the shell that ran the tests.
    pub fn clean_env(mut self) -> Self {
        let path = std::env::var_os("PATH");
        self.command.env_clear();
        if let Some(path) = path {
            self.command.env("PATH", path);
        }
        self
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.command.env(key, value);
        self
    }

    pub fn envs<K, V>(mut self, vars: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.command.envs(vars);
        self
    }

    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.command.current_dir(dir);
        self
    }

    /// Stdout and stderr appended to `path`: a process restarted under the same log
    /// keeps the lines of its earlier runs.
    pub fn log_to(mut self, path: &Path) -> Result<Self, ProcessError> {
        let log_error = |source| ProcessError::Log {
            path: path.to_owned(),
            source,
        };
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(log_error)?;
        self.command.stdout(log.try_clone().map_err(log_error)?);
        self.command.stderr(log);
        Ok(self)
    }

    pub fn spawn(mut self) -> Result<QuireProcess, ProcessError> {
        let child = self.command.spawn().map_err(|source| ProcessError::Spawn {
            binary: self.binary.clone(),
            source,
        })?;
        Ok(QuireProcess {
            binary: self.binary,
            child,
        })
    }
}

/// A started Quire binary; dropping it kills it.
pub struct QuireProcess {
    binary: String,
    child: Child,
}

impl QuireProcess {
    /// The binary's name, e.g. `quire-worker`.
    pub fn binary(&self) -> &str {
        &self.binary
    }

    /// The process id while it has not been reaped.
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// SIGKILL, and reap it (a process that has already exited is only reaped).
    pub async fn kill(&mut self) {
        // The only error is "already exited", which is what was asked for.
        let _ = self.child.kill().await;
    }

    /// SIGTERM: the graceful way an orchestrator stops a process.
    pub fn terminate(&self) -> Result<(), ProcessError> {
        let pid = self
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .ok_or_else(|| ProcessError::Exited {
                binary: self.binary.clone(),
            })?;
        kill(Pid::from_raw(pid), Signal::SIGTERM).map_err(|source| ProcessError::Signal {
            binary: self.binary.clone(),
            source,
        })
    }

    /// Waits for the process to exit on its own; whether it did within `deadline`.
    pub async fn wait_exit(&mut self, deadline: Duration) -> bool {
        tokio::time::timeout(deadline, self.child.wait())
            .await
            .is_ok()
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_not_built_is_named_in_the_error_with_the_folder_it_was_looked_for_in() {
        // This test runs from target/<profile>/deps: binaries are looked for one level up.
        let Err(ProcessError::Missing(path)) = binary_path("quire-not-built") else {
            panic!("a binary that was never built is missing");
        };
        assert!(path.ends_with("quire-not-built"), "{}", path.display());
        let folder = path.parent().and_then(Path::file_name);
        assert_ne!(folder, Some(OsStr::new("deps")), "{}", path.display());
    }
}
