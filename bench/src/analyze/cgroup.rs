//! A cgroup (v2) of the bench's own around the worker, for its CPU: every process the
//! worker starts is in it, whoever reaps it. The worker's own count of waited-for
//! children misses its tools: bubblewrap's init in the tool's pid namespace is reaped by
//! the system, not by bubblewrap, so the tools' time never reaches the worker. A cgroup's
//! `cpu.stat` counts them (cgroup v2 keeps it without any controller enabled).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub struct CpuGroup {
    path: PathBuf,
}

impl CpuGroup {
    /// A new group `name` under the bench's own cgroup; none where cgroup v2 is not
    /// mounted or the bench may not make one (not root).
    pub fn create(name: &str) -> Option<Self> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let mount = cgroup2_mount(&mountinfo)?;
        let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let own = cgroups.lines().find_map(|line| line.strip_prefix("0::"))?;
        let path = mount.join(own.trim_start_matches('/')).join(name);
        match std::fs::create_dir(&path) {
            Ok(()) => Some(Self { path }),
            Err(error) => {
                tracing::warn!(%error, path = %path.display(), "no cgroup for the worker's cpu");
                None
            }
        }
    }

    /// Moves the process `pid` (all its threads) into the group; its children from now on
    /// are born in it.
    pub fn adopt(&self, pid: i32) -> std::io::Result<()> {
        std::fs::write(self.path.join("cgroup.procs"), pid.to_string())
    }

    /// CPU seconds (user and system) of every process that has been in the group.
    pub fn cpu_seconds(&self) -> std::io::Result<f64> {
        let stat = std::fs::read_to_string(self.path.join("cpu.stat"))?;
        usage_seconds(&stat).ok_or_else(|| std::io::Error::other("cpu.stat has no usage_usec"))
    }

    /// Removes the group once its processes are gone (they were killed with the stack); a
    /// group still busy after a few seconds is left, with a warning.
    pub async fn remove(self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let empty = std::fs::read_to_string(self.path.join("cgroup.procs"))
                .map(|procs| procs.trim().is_empty())
                .unwrap_or(true);
            if empty || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if let Err(error) = std::fs::remove_dir(&self.path) {
            tracing::warn!(%error, path = %self.path.display(), "the bench's cgroup is left behind");
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or
/// `/sys/fs/cgroup/unified` beside v1 controllers), from `/proc/self/mountinfo`.
fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (fields, rest) = line.split_once(" - ")?;
        (rest.split_whitespace().next()? == "cgroup2")
            .then(|| fields.split_whitespace().nth(4).map(PathBuf::from))
            .flatten()
    })
}

/// `usage_usec` of a `cpu.stat`, in seconds.
fn usage_seconds(stat: &str) -> Option<f64> {
    stat.lines()
        .find_map(|line| line.strip_prefix("usage_usec "))
        .and_then(|value| value.trim().parse::<u64>().ok())
        .map(|usec| usec as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_v2_mount_is_found_beside_v1_controllers() {
        let mountinfo = "\
35 25 0:30 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
43 25 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        assert_eq!(
            cgroup2_mount(mountinfo),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            cgroup2_mount("35 25 0:30 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw"),
            None
        );
    }

    /// What the group is for: a tool's time inside bubblewrap's pid namespace, which its
    /// parent's count of waited-for children never sees. Needs root and cgroup v2; where
    /// the bench cannot make a group it reports so, and this has nothing to check.
    #[tokio::test]
    async fn a_tool_in_a_pid_namespace_is_counted_in_the_group() {
        let Some(group) = CpuGroup::create(&format!("quire-bench-test-{}", std::process::id()))
        else {
            return;
        };
        // The shell joins the group itself before it starts bubblewrap: no race.
        let script = format!(
            "echo $$ > {} && exec bwrap --unshare-all --die-with-parent --ro-bind / / \
             --proc /proc --dev /dev sh -c 'i=0; while [ $i -lt 500000 ]; do i=$((i+1)); done'",
            group.path().join("cgroup.procs").display()
        );
        let status = std::process::Command::new("sh")
            .args(["-c", &script])
            .status()
            .expect("sh");
        assert!(
            status.success(),
            "bubblewrap runs here (scripts/test installs it)"
        );
        let seconds = group.cpu_seconds().expect("cpu.stat");
        group.remove().await;
        assert!(seconds >= 0.1, "the loop's time is the group's: {seconds}");
    }

    #[test]
    fn usage_is_read_from_cpu_stat() {
        let stat = "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n";
        assert_eq!(usage_seconds(stat), Some(2.5));
        assert_eq!(usage_seconds("user_usec 1\n"), None);
    }
}
