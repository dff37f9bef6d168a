//! What a process of the stack cost: CPU seconds and peak RSS, from /proc.

use quire_shared::process::QuireProcess;

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// User and system CPU seconds since the process started.
    pub cpu_seconds: f64,
    /// The largest resident set the process reached (`VmHWM`).
    pub peak_rss_bytes: u64,
}

impl Usage {
    /// The usage of a running process; zero for one that has exited (its /proc entry is
    /// gone, and a bench reports rather than fails on it).
    pub fn of(process: &QuireProcess) -> Self {
        process
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .and_then(|pid| read(pid).ok())
            .unwrap_or_default()
    }

    /// Several processes as one: CPU summed, the largest peak.
    pub fn combine(self, other: Self) -> Self {
        Self {
            cpu_seconds: self.cpu_seconds + other.cpu_seconds,
            peak_rss_bytes: self.peak_rss_bytes.max(other.peak_rss_bytes),
        }
    }
}

fn read(pid: i32) -> procfs::ProcResult<Usage> {
    let process = procfs::process::Process::new(pid)?;
    let stat = process.stat()?;
    // The kernel counts utime and stime in clock ticks (USER_HZ).
    let cpu_seconds = (stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64;
    let peak_kib = process.status()?.vmhwm.unwrap_or(0);
    Ok(Usage {
        cpu_seconds,
        peak_rss_bytes: peak_kib * 1024,
    })
}

/// The CPU seconds every core of the machine has been busy since boot (user, nice,
/// system, irq and softirq; not idle, I/O wait or time stolen by the hypervisor): read
/// before and after a round, what the round cost the whole machine, every process of
/// the stack and the tools they run included.
pub fn machine_busy_seconds() -> anyhow::Result<f64> {
    use procfs::{CurrentSI, KernelStats};
    let total = KernelStats::current()?.total;
    let ticks = total.user
        + total.nice
        + total.system
        + total.irq.unwrap_or(0)
        + total.softirq.unwrap_or(0);
    Ok(ticks as f64 / procfs::ticks_per_second() as f64)
}

/// The cores the machine's busy seconds are spread over.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}
