//! What a process tree costs: the CPU of a process and of every child it has waited for
//! (the kernel adds a reaped child's time to its parent's `cutime`/`cstime`, so a worker's
//! count includes its tools, and theirs their own children), and the peak of the tree's
//! summed resident set, sampled, since a tool's own peak is gone with it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// How often the tree's memory is sampled: tesseract runs for a second or more on a
/// page, and walking /proc costs the bench a few milliseconds each time.
const SAMPLE_EVERY: Duration = Duration::from_millis(200);

/// User and system CPU seconds of `pid` and of its children it has waited for; 0 for a
/// process that is gone.
pub fn cpu_seconds(pid: i32) -> f64 {
    cpu(pid).map_or(0.0, |(own, children)| own + children)
}

/// User and system CPU seconds of the children `pid` has waited for.
pub fn children_cpu_seconds(pid: i32) -> f64 {
    cpu(pid).map_or(0.0, |(_, children)| children)
}

/// A process's own CPU seconds and its waited-for children's.
fn cpu(pid: i32) -> Option<(f64, f64)> {
    let stat = procfs::process::Process::new(pid)
        .and_then(|process| process.stat())
        .ok()?;
    let seconds = |ticks: u64| ticks as f64 / procfs::ticks_per_second() as f64;
    let children = u64::try_from(stat.cutime + stat.cstime).unwrap_or(0);
    Some((seconds(stat.utime + stat.stime), seconds(children)))
}

/// The resident bytes of `roots` and every process descended from them (`with_roots`:
/// the roots' own too).
fn tree_rss(roots: &[i32], with_roots: bool) -> u64 {
    let Ok(all) = procfs::process::all_processes() else {
        return 0;
    };
    let mut parent = HashMap::new();
    let mut rss = HashMap::new();
    for process in all.flatten() {
        if let Ok(stat) = process.stat() {
            parent.insert(stat.pid, stat.ppid);
            rss.insert(stat.pid, stat.rss * procfs::page_size());
        }
    }
    rss.iter()
        .filter(|(pid, _)| in_tree(**pid, roots, with_roots, &parent))
        .map(|(_, bytes)| bytes)
        .sum()
}

/// Whether `pid` is one of `roots` (counted when `with_roots`) or descends from one.
fn in_tree(pid: i32, roots: &[i32], with_roots: bool, parent: &HashMap<i32, i32>) -> bool {
    if roots.contains(&pid) {
        return with_roots;
    }
    let mut at = pid;
    // A parent chain is short; the bound only guards against a cycle read mid-change.
    for _ in 0..64 {
        match parent.get(&at) {
            Some(&up) if roots.contains(&up) => return true,
            Some(&up) if up > 1 => at = up,
            _ => return false,
        }
    }
    false
}

/// Samples a tree's summed resident set until stopped; the largest sample is its peak.
pub struct PeakSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl PeakSampler {
    pub fn start(roots: Vec<i32>, with_roots: bool) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let task = tokio::task::spawn_blocking({
            let (stop, peak) = (Arc::clone(&stop), Arc::clone(&peak));
            move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(tree_rss(&roots, with_roots), Ordering::Relaxed);
                    std::thread::sleep(SAMPLE_EVERY);
                }
            }
        });
        Self { stop, peak, task }
    }

    /// The peak seen, in bytes.
    pub async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        self.peak.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_is_its_roots_and_their_descendants() {
        // 10 → 11 → 12, 10 → 13; 20 elsewhere; 1 is init.
        let parent: HashMap<i32, i32> = [(10, 1), (11, 10), (12, 11), (13, 10), (20, 1)]
            .into_iter()
            .collect();
        let members = |with_roots| {
            let mut members: Vec<i32> = parent
                .keys()
                .copied()
                .filter(|pid| in_tree(*pid, &[10], with_roots, &parent))
                .collect();
            members.sort_unstable();
            members
        };
        assert_eq!(members(true), [10, 11, 12, 13]);
        assert_eq!(members(false), [11, 12, 13]);
    }

    #[test]
    fn a_waited_child_counts_in_its_parent_cpu() {
        let me = std::process::id() as i32;
        let before = children_cpu_seconds(me);
        let status = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 500000 ]; do i=$((i+1)); done"])
            .status()
            .expect("sh");
        assert!(status.success());
        // The test's own thread only waited: the time is the child's.
        assert!(
            children_cpu_seconds(me) - before >= 0.1 && cpu_seconds(me) >= 0.1,
            "the child's CPU is counted once it is waited for"
        );
    }
}
