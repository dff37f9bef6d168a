//! The one launcher of external tools (pdftoppm, pdftotext, tesseract): a child process
//! with limits (a wall-clock timeout, an address-space limit and a CPU-time limit, set by
//! `prlimit` before the tool starts), in a process group of its own that is killed whole
//! on timeout or when the job is dropped, confined by `sandbox` (an allowlisted
//! environment, and bubblewrap with only the job's work folder). Output is bounded;
//! stderr goes to the log only.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::sandbox;
use crate::config::SandboxMode;

/// Limits of one tool run.
#[derive(Debug, Clone, Copy)]
pub struct ToolLimits {
    pub timeout: Duration,
    pub memory_bytes: u64,
    pub cpu_seconds: u64,
    /// Stdout beyond this is an error, not a truncation.
    pub max_output_bytes: usize,
}

/// Where a tool runs: the job's work folder (its current folder, its `HOME` and, in the
/// sandbox, the only folder it sees and may write) and how it is confined. Every file it
/// is given must be inside `work`.
#[derive(Debug, Clone, Copy)]
pub struct Confinement<'a> {
    pub sandbox: SandboxMode,
    pub work: &'a Path,
}

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("{tool} could not be started: {source}")]
    Unavailable {
        tool: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{tool} ran past its time limit and was killed")]
    TimedOut { tool: String },
    #[error("{tool} printed more than its output limit")]
    OutputTooLarge { tool: String },
    /// Exited unsuccessfully, or was killed by a limit (memory, CPU).
    #[error("{tool} failed ({status})")]
    Failed {
        tool: String,
        status: String,
        /// The end of its stderr, for the log and for classifying the failure.
        stderr: String,
    },
}

/// Kills the tool's process group unless disarmed: covers timeouts and a job future
/// dropped mid-run (cancellation, shutdown).
struct GroupGuard(Option<Pid>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            // The group may be gone already; nothing to do then.
            let _ = killpg(pid, Signal::SIGKILL);
        }
    }
}

async fn read_bounded(
    mut stream: impl AsyncRead + Unpin,
    limit: usize,
) -> std::io::Result<(Vec<u8>, bool)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let mut over = false;
    loop {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Ok((buffer, over));
        }
        if buffer.len() + read > limit {
            over = true;
            // Keep draining so the tool never blocks on a full pipe.
            continue;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
}

const STDERR_LIMIT: usize = 16 * 1024;

/// One tool run as the pipeline asked for it: the program (resolved on `PATH`), its
/// arguments, its current folder and its whole environment; the limits and the sandbox
/// around it are not part of it. `quire-bench` records them ([`record`]) to run the very
/// same commands by hand, so that its by-hand baseline cannot drift from the pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub work: PathBuf,
    pub env: Vec<(OsString, OsString)>,
}

tokio::task_local! {
    /// The runs of the analysis being recorded; unset (and never looked at beyond a
    /// check) in the worker.
    static RECORDING: Arc<Mutex<Vec<Invocation>>>;
}

/// Runs `future` (an analysis) and returns, beside its output, every tool run it asked
/// for, in order. Only runs made on `future`'s own task are seen.
pub async fn record<F: Future>(future: F) -> (F::Output, Vec<Invocation>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let output = RECORDING.scope(Arc::clone(&log), future).await;
    let runs = std::mem::take(&mut *log.lock().unwrap_or_else(PoisonError::into_inner));
    (output, runs)
}

/// Runs `program args…` (found on the worker's `PATH`) confined and under `limits`, and
/// returns its stdout.
pub async fn run<I, S>(
    program: &str,
    args: I,
    confinement: Confinement<'_>,
    limits: ToolLimits,
) -> Result<Vec<u8>, ToolError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let tool = program.to_owned();
    let path = sandbox::resolve(program).map_err(|error| ToolError::Unavailable {
        tool: tool.clone(),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, error),
    })?;
    let args: Vec<OsString> = args
        .into_iter()
        .map(|arg| arg.as_ref().to_owned())
        .collect();
    let env = sandbox::environment(confinement.work);
    // Outside a recording (the worker) this is one failed look-up.
    let _ = RECORDING.try_with(|log| {
        log.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Invocation {
                program: path.clone(),
                args: args.clone(),
                work: confinement.work.to_owned(),
                env: env.clone(),
            });
    });
    let mut command = Command::new("prlimit");
    command
        .arg(format!("--as={}", limits.memory_bytes))
        .arg(format!("--cpu={}", limits.cpu_seconds))
        .arg("--")
        .args(sandbox::argv(confinement.sandbox, &path, confinement.work))
        .args(&args)
        // Nothing of the worker's environment (its secrets, its database URL) but the
        // allowlist.
        .env_clear()
        .envs(env)
        .current_dir(confinement.work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command.spawn().map_err(|source| ToolError::Unavailable {
        tool: tool.clone(),
        source,
    })?;
    // prlimit execs the tool, so the child's pid leads the tool's process group.
    let mut guard = GroupGuard(
        child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw),
    );
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let outcome = tokio::time::timeout(limits.timeout, async {
        let out = async {
            match stdout {
                Some(stdout) => read_bounded(stdout, limits.max_output_bytes).await,
                None => Ok((Vec::new(), false)),
            }
        };
        let err = async {
            match stderr {
                Some(stderr) => read_bounded(stderr, STDERR_LIMIT).await,
                None => Ok((Vec::new(), false)),
            }
        };
        let (out, err) = tokio::join!(out, err);
        let status = child.wait().await;
        (out, err, status)
    })
    .await;
    let Ok((out, err, status)) = outcome else {
        tracing::warn!(tool, "tool timed out; its process group is killed");
        return Err(ToolError::TimedOut { tool });
    };
    guard.0 = None;
    let (stdout, over) = out.map_err(|source| ToolError::Unavailable {
        tool: tool.clone(),
        source,
    })?;
    let stderr = err
        .map(|(bytes, _)| String::from_utf8_lossy(&bytes).trim().to_owned())
        .unwrap_or_default();
    let status = status.map_err(|source| ToolError::Unavailable {
        tool: tool.clone(),
        source,
    })?;
    if !stderr.is_empty() {
        tracing::debug!(tool, stderr = %stderr, "tool stderr");
    }
    if over {
        return Err(ToolError::OutputTooLarge { tool });
    }
    if !status.success() {
        tracing::warn!(tool, %status, stderr = %stderr, "tool failed");
        return Err(ToolError::Failed {
            tool,
            status: status.to_string(),
            stderr,
        });
    }
    Ok(stdout)
}

/// Runs `true` the way every tool runs, in a folder of its own: the worker's start-up
/// proof that the configured sandbox works on this machine.
pub async fn check_sandbox(mode: SandboxMode) -> Result<(), ToolError> {
    let work = tempfile::tempdir().map_err(|source| ToolError::Unavailable {
        tool: "sandbox".into(),
        source,
    })?;
    let limits = ToolLimits {
        timeout: Duration::from_secs(10),
        memory_bytes: 256 * 1024 * 1024,
        cpu_seconds: 5,
        max_output_bytes: 1024,
    };
    let confinement = Confinement {
        sandbox: mode,
        work: work.path(),
    };
    run("true", Vec::<OsString>::new(), confinement, limits)
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests' work folder, unconfined: these tests are about limits.
    fn open(work: &tempfile::TempDir) -> Confinement<'_> {
        Confinement {
            sandbox: SandboxMode::None,
            work: work.path(),
        }
    }

    fn limits(timeout_ms: u64) -> ToolLimits {
        ToolLimits {
            timeout: Duration::from_millis(timeout_ms),
            memory_bytes: 512 * 1024 * 1024,
            cpu_seconds: 10,
            max_output_bytes: 1024,
        }
    }

    #[tokio::test]
    async fn a_recording_holds_every_run_of_its_analysis_in_order() {
        let work = tempfile::tempdir().expect("work");
        let ((), runs) = record(async {
            run("sh", ["-c", "true"], open(&work), limits(5000))
                .await
                .expect("runs");
            let _ = run("sh", ["-c", "exit 3"], open(&work), limits(5000)).await;
        })
        .await;
        let args: Vec<Vec<OsString>> = runs.iter().map(|run| run.args.clone()).collect();
        assert_eq!(
            args,
            [
                vec![OsString::from("-c"), OsString::from("true")],
                vec![OsString::from("-c"), OsString::from("exit 3")],
            ]
        );
        assert!(
            runs.iter()
                .all(|run| run.program.ends_with("sh") && run.work == work.path())
        );
        assert!(
            runs[0]
                .env
                .iter()
                .any(|(name, value)| name == "OMP_THREAD_LIMIT" && value == "1"),
            "the environment the tool got is recorded"
        );
        // Outside a recording nothing is kept, and nothing fails.
        run("sh", ["-c", "true"], open(&work), limits(5000))
            .await
            .expect("runs");
    }

    #[tokio::test]
    async fn output_is_returned_and_failures_carry_stderr() {
        let work = tempfile::tempdir().expect("work");
        let out = run("sh", ["-c", "printf hello"], open(&work), limits(5000))
            .await
            .expect("runs");
        assert_eq!(out, b"hello");
        match run(
            "sh",
            ["-c", "echo broken >&2; exit 3"],
            open(&work),
            limits(5000),
        )
        .await
        {
            Err(ToolError::Failed { stderr, .. }) => assert_eq!(stderr, "broken"),
            other => panic!("expected a failure, got {other:?}"),
        }
        assert!(matches!(
            run("no-such-tool-anywhere", ["x"], open(&work), limits(5000)).await,
            Err(ToolError::Unavailable { .. })
        ));
    }

    #[tokio::test]
    async fn a_timeout_kills_the_whole_process_group() {
        let work = tempfile::tempdir().expect("work");
        let marker = work.path().join("pid");
        let path = marker.display().to_string();
        // The shell (the group's leader) records its pid, then leaves a grandchild behind.
        let script = format!("echo $$ > {path}; sleep 30 & sleep 30");
        let result = run("sh", ["-c", &script], open(&work), limits(500)).await;
        assert!(
            matches!(result, Err(ToolError::TimedOut { .. })),
            "{result:?}"
        );
        let group: i32 = std::fs::read_to_string(&marker)
            .expect("read")
            .trim()
            .parse()
            .expect("pid");
        // Wait, with a deadline, until no process of the group is left (grandchild too).
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while killpg(Pid::from_raw(group), None).is_ok() {
            assert!(
                std::time::Instant::now() < deadline,
                "the process group survived"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn output_past_the_limit_is_an_error() {
        let work = tempfile::tempdir().expect("work");
        let result = run(
            "sh",
            ["-c", "head -c 4096 /dev/zero"],
            open(&work),
            limits(5000),
        )
        .await;
        assert!(
            matches!(result, Err(ToolError::OutputTooLarge { .. })),
            "{result:?}"
        );
    }

    #[tokio::test]
    async fn the_memory_limit_stops_a_greedy_tool() {
        let mut greedy = limits(10_000);
        greedy.memory_bytes = 64 * 1024 * 1024;
        // python3 cannot allocate 512 MiB under a 64 MiB address-space limit.
        let work = tempfile::tempdir().expect("work");
        let result = run(
            "python3",
            ["-c", "x = bytearray(512 * 1024 * 1024)"],
            open(&work),
            greedy,
        )
        .await;
        assert!(
            matches!(result, Err(ToolError::Failed { .. })),
            "{result:?}"
        );
    }

    fn sandboxed(work: &tempfile::TempDir) -> Confinement<'_> {
        Confinement {
            sandbox: SandboxMode::Bwrap,
            work: work.path(),
        }
    }

    #[tokio::test]
    async fn a_sandboxed_tool_writes_only_its_work_folder_and_sees_nothing_else() {
        let work = tempfile::tempdir().expect("work");
        let elsewhere = tempfile::tempdir().expect("another folder");
        std::fs::write(elsewhere.path().join("other.txt"), "not yours").expect("write");
        std::fs::write(work.path().join("input.txt"), "yours").expect("write");
        let other = elsewhere.path().display();
        let script = format!(
            "cat input.txt; echo; cat {other}/other.txt 2>/dev/null || echo other=unreadable; \
             touch /usr/planted 2>/dev/null || echo system=read-only; \
             echo written > output.txt; echo home=$HOME; env | wc -l"
        );
        let out = run("sh", ["-c", &script], sandboxed(&work), limits(10_000))
            .await
            .expect("runs in the sandbox");
        let out = String::from_utf8_lossy(&out);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[..3],
            ["yours", "other=unreadable", "system=read-only"],
            "{out}"
        );
        assert_eq!(lines[3], format!("home={}", work.path().display()));
        let allowed = sandbox::environment(work.path()).len();
        let seen: usize = lines[4].trim().parse().expect("a count");
        // `sh` adds PWD (and may add SHLVL and `_`) of its own.
        assert!(seen <= allowed + 3, "{seen} variables: {out}");
        assert_eq!(
            std::fs::read_to_string(work.path().join("output.txt")).expect("output"),
            "written\n"
        );
    }

    #[tokio::test]
    async fn a_timeout_kills_every_process_of_the_sandbox() {
        let work = tempfile::tempdir().expect("work");
        // A duration no other process on the machine sleeps for marks the tool's processes.
        let mark = format!("30.{}", std::process::id());
        let script = format!("sleep {mark} & sleep {mark}");
        let result = run("sh", ["-c", &script], sandboxed(&work), limits(1000)).await;
        assert!(
            matches!(result, Err(ToolError::TimedOut { .. })),
            "{result:?}"
        );
        let running = || {
            std::fs::read_dir("/proc")
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
                .any(|cmdline| String::from_utf8_lossy(&cmdline).contains(&mark))
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while running() {
            assert!(
                std::time::Instant::now() < deadline,
                "a process of the sandbox survived"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn the_sandbox_works_on_this_machine() {
        check_sandbox(SandboxMode::Bwrap)
            .await
            .expect("bubblewrap runs here (scripts/test installs it)");
        check_sandbox(SandboxMode::None).await.expect("runs");
    }
}
