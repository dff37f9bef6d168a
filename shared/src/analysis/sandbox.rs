//! What an external tool may see: a cleared environment with an allowlist, and (mode
//! `bwrap`) a bubblewrap sandbox with no network, a read-only system, a fresh /tmp, its
//! own /proc and a minimal /dev, and only the job's work folder visible and writable. A
//! tool parses hostile files; whatever takes it over finds no secret, no other tenant's
//! file and no socket.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::config::SandboxMode;

/// Variables a tool gets from the worker when they are set: where to find programs,
/// the locale (text encoding of its messages), and tesseract's language data.
const PASSED_THROUGH: [&str; 5] = ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TESSDATA_PREFIX"];

/// Top-level folders of the system, bound read-only when they are folders and
/// re-created when they are symbolic links (a merged-/usr system links /lib to usr/lib).
const SYSTEM: [&str; 7] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// What else the tools read, bound read-only where it exists: the dynamic linker's
/// cache, fontconfig (pdftoppm's font substitution) and Debian's alternatives links.
const SYSTEM_FILES: [&str; 4] = [
    "/etc/ld.so.cache",
    "/etc/fonts",
    "/etc/alternatives",
    "/var/cache/fontconfig",
];

/// The start of the command line that runs `program` (resolved to a path) under `mode`,
/// confined to `work`: the program's arguments follow it.
pub(super) fn argv(mode: SandboxMode, program: &Path, work: &Path) -> Vec<OsString> {
    match mode {
        SandboxMode::None => vec![program.as_os_str().to_owned()],
        SandboxMode::Bwrap => {
            let mut argv = vec![OsString::from("bwrap")];
            argv.extend(bwrap_args(
                program,
                work,
                std::env::var_os("TESSDATA_PREFIX"),
            ));
            argv.push(program.as_os_str().to_owned());
            argv
        }
    }
}

/// The tool's whole environment (the caller clears the rest): the allowlisted variables
/// the worker has, `HOME` in the work folder, and one thread for tesseract.
pub(super) fn environment(work: &Path) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = PASSED_THROUGH
        .iter()
        .filter_map(|name| std::env::var_os(name).map(|value| (OsString::from(name), value)))
        .collect();
    env.push(("HOME".into(), work.as_os_str().to_owned()));
    // Tesseract would start a thread per core; one job, one core.
    env.push(("OMP_THREAD_LIMIT".into(), "1".into()));
    env
}

/// bubblewrap's options up to the `--` before the program.
fn bwrap_args(program: &Path, work: &Path, tessdata: Option<OsString>) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    let mut push = |items: &[&OsStr]| args.extend(items.iter().map(|item| item.to_os_string()));
    // Every namespace: no network (a loopback of its own), no view of the worker's
    // processes, its IPC or its hostname. Killed with the worker; no terminal to inject into.
    push(&[
        "--unshare-all".as_ref(),
        "--die-with-parent".as_ref(),
        "--new-session".as_ref(),
    ]);
    for dir in SYSTEM {
        let path = Path::new(dir);
        match std::fs::read_link(path) {
            Ok(target) => push(&["--symlink".as_ref(), target.as_os_str(), dir.as_ref()]),
            Err(_) if path.is_dir() => push(&["--ro-bind".as_ref(), dir.as_ref(), dir.as_ref()]),
            Err(_) => {}
        }
    }
    for file in SYSTEM_FILES {
        push(&["--ro-bind-try".as_ref(), file.as_ref(), file.as_ref()]);
    }
    push(&[
        "--proc".as_ref(),
        "/proc".as_ref(),
        "--dev".as_ref(),
        "/dev".as_ref(),
        "--tmpfs".as_ref(),
        "/tmp".as_ref(),
    ]);
    // After the fresh /tmp, so that a tool or a work folder under /tmp shows through it.
    if !SYSTEM.iter().any(|dir| program.starts_with(dir)) {
        push(&[
            "--ro-bind".as_ref(),
            program.as_os_str(),
            program.as_os_str(),
        ]);
    }
    if let Some(tessdata) = tessdata.as_deref() {
        push(&["--ro-bind-try".as_ref(), tessdata, tessdata]);
    }
    push(&[
        "--bind".as_ref(),
        work.as_os_str(),
        work.as_os_str(),
        "--chdir".as_ref(),
        work.as_os_str(),
        "--".as_ref(),
    ]);
    args
}

/// The program's path on the worker's `PATH`, which the sandbox binds to the same path.
pub(super) fn resolve(program: &str) -> Result<PathBuf, which::Error> {
    which::which(program)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn only_the_work_folder_is_writable_and_a_tool_outside_the_system_is_bound_read_only() {
        let args = pairs(&bwrap_args(
            Path::new("/opt/tools/pdftotext"),
            Path::new("/tmp/job-1"),
            None,
        ));
        let joined = args.join(" ");
        assert!(
            joined.starts_with("--unshare-all --die-with-parent"),
            "{joined}"
        );
        assert!(joined.contains("--ro-bind /usr /usr"), "{joined}");
        assert!(
            joined.contains("--tmpfs /tmp --ro-bind /opt/tools/pdftotext /opt/tools/pdftotext"),
            "{joined}"
        );
        assert!(joined.ends_with("--bind /tmp/job-1 /tmp/job-1 --chdir /tmp/job-1 --"));
        assert_eq!(args.iter().filter(|arg| *arg == "--bind").count(), 1);
        // A system tool needs no bind of its own.
        let system = pairs(&bwrap_args(
            Path::new("/usr/bin/pdftotext"),
            Path::new("/tmp/job-1"),
            None,
        ));
        assert!(!system.join(" ").contains("--ro-bind /usr/bin/pdftotext"));
    }
}
