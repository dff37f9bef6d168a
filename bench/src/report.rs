//! The bench's output: one JSON line (what scripts read), then a table (what people
//! read).

use serde_json::{Value, json};

use crate::args::BenchArgs;
use crate::measure::Spans;
use crate::usage::Usage;

/// Everything a run measured.
pub struct Results<'a> {
    pub args: &'a BenchArgs,
    /// The storage backend every process of the run used.
    pub storage: String,
    /// The dispatcher's batch size in force (the argument or the settings' default).
    pub dispatcher_batch_size: i64,
    /// Jobs per commit of the direct enqueue.
    pub enqueue_batch: usize,
    pub enqueue_seconds: f64,
    pub drained: Spans,
    /// Database commits over the drain.
    pub drain_commits: i64,
    /// CPU over the drain, peak RSS over the drain and the steady run.
    pub dispatcher: Usage,
    pub worker: Usage,
    pub steady_jobs: usize,
    pub latency: Spans,
    pub uploads_per_second: f64,
    pub api_peak_rss: u64,
}

impl Results<'_> {
    fn per_thousand_jobs(&self, cpu: f64) -> f64 {
        let jobs = self.args.jobs as f64;
        if jobs > 0.0 { cpu / jobs * 1000.0 } else { 0.0 }
    }

    pub fn json(&self) -> Value {
        let args = self.args;
        let jobs = args.jobs as f64;
        let latency = &self.latency;
        json!({
            "workload": format!("{:?}", args.workload).to_lowercase(),
            "storage": self.storage,
            "jobs": args.jobs,
            "slots": args.slots,
            "workers": args.workers,
            "dispatcher_batch_size": self.dispatcher_batch_size,
            "succeeded": self.drained.succeeded,
            "enqueue_jobs_per_second": jobs / self.enqueue_seconds.max(f64::EPSILON),
            "enqueue_batch": self.enqueue_batch,
            "http_uploads_per_second": self.uploads_per_second,
            "upload_clients": args.upload_clients,
            "drain_jobs_per_second": jobs / self.drained.drain_seconds.max(f64::EPSILON),
            "db_commits_per_job": self.drain_commits as f64 / jobs.max(1.0),
            "cpu_seconds_per_1000_jobs": {
                "dispatcher": self.per_thousand_jobs(self.dispatcher.cpu_seconds),
                "worker": self.per_thousand_jobs(self.worker.cpu_seconds),
            },
            "peak_rss_bytes": {
                "dispatcher": self.dispatcher.peak_rss_bytes,
                "worker": self.worker.peak_rss_bytes,
                "api": self.api_peak_rss,
            },
            "steady": {
                "rate": args.rate, "jobs": self.steady_jobs, "succeeded": latency.succeeded,
                "commit_to_start_ms": { "p50": latency.start_p50, "p95": latency.start_p95, "p99": latency.start_p99, "max": latency.start_max },
                "commit_to_finish_ms": { "p50": latency.finish_p50, "p95": latency.finish_p95, "p99": latency.finish_p99, "max": latency.finish_max },
                "outbox_lag_ms": { "p50": latency.publish_p50, "p99": latency.publish_p99 },
                "path_p50_ms": {
                    "commit_to_dispatcher_claim": latency.hop_wake_p50,
                    "dispatcher_claim_to_published": latency.hop_publish_p50,
                    "dispatcher_claim_to_worker_claim": latency.hop_pickup_p50,
                    "worker_claim_to_finish": latency.hop_run_p50,
                },
                "path_p99_ms": {
                    "commit_to_dispatcher_claim": latency.hop_wake_p99,
                    "dispatcher_claim_to_published": latency.hop_publish_p99,
                    "dispatcher_claim_to_worker_claim": latency.hop_pickup_p99,
                    "worker_claim_to_finish": latency.hop_run_p99,
                },
            },
        })
    }

    /// The table of the run (its JSON line is printed apart).
    pub fn print_table(&self) {
        let report = self.json();
        let (args, latency) = (self.args, &self.latency);
        let number = |key: &str| report[key].as_f64().unwrap_or(0.0);
        row("workload", report["workload"].to_string());
        row("storage", self.storage.clone());
        row(
            &format!(
                "direct enqueue (jobs/s, one client, {} per commit)",
                self.enqueue_batch
            ),
            format!("{:.0}", number("enqueue_jobs_per_second")),
        );
        row(
            &format!(
                "HTTP uploads of {} bytes (/s, {} clients)",
                args.file_size, args.upload_clients
            ),
            format!("{:.0}", self.uploads_per_second),
        );
        row(
            "drain (jobs/s)",
            format!("{:.0}", number("drain_jobs_per_second")),
        );
        row(
            "database commits per job (drain)",
            format!("{:.2}", number("db_commits_per_job")),
        );
        row(
            "CPU s per 1,000 jobs: dispatcher / worker",
            format!(
                "{:.3} / {:.3}",
                self.per_thousand_jobs(self.dispatcher.cpu_seconds),
                self.per_thousand_jobs(self.worker.cpu_seconds)
            ),
        );
        row(
            "peak RSS MiB: dispatcher / worker / api",
            format!(
                "{:.1} / {:.1} / {:.1}",
                mebibytes(self.dispatcher.peak_rss_bytes),
                mebibytes(self.worker.peak_rss_bytes),
                mebibytes(self.api_peak_rss)
            ),
        );
        row(
            &format!(
                "steady {} jobs/s: commit → start p50/p95/p99/max ms",
                args.rate
            ),
            format!(
                "{:.2} / {:.2} / {:.2} / {:.2}",
                latency.start_p50, latency.start_p95, latency.start_p99, latency.start_max
            ),
        );
        row(
            &format!(
                "steady {} jobs/s: commit → finish p50/p95/p99/max ms",
                args.rate
            ),
            format!(
                "{:.2} / {:.2} / {:.2} / {:.2}",
                latency.finish_p50, latency.finish_p95, latency.finish_p99, latency.finish_max
            ),
        );
        row(
            "outbox lag p50/p99 ms",
            format!("{:.2} / {:.2}", latency.publish_p50, latency.publish_p99),
        );
        row(
            "path p50 ms: to dispatcher / to worker / run",
            format!(
                "{:.2} / {:.2} / {:.2} (published {:.2} after the dispatcher's claim)",
                latency.hop_wake_p50,
                latency.hop_pickup_p50,
                latency.hop_run_p50,
                latency.hop_publish_p50
            ),
        );
        row(
            "path p99 ms: to dispatcher / to worker / run",
            format!(
                "{:.2} / {:.2} / {:.2} (published {:.2} after the dispatcher's claim)",
                latency.hop_wake_p99,
                latency.hop_pickup_p99,
                latency.hop_run_p99,
                latency.hop_publish_p99
            ),
        );
    }
}

/// With runs on more than one storage backend, their upload rates and drains side by
/// side.
pub fn print_storage_comparison(runs: &[Results<'_>]) {
    if runs.len() < 2 {
        return;
    }
    println!();
    let names: Vec<&str> = runs.iter().map(|run| run.storage.as_str()).collect();
    let each = |value: &dyn Fn(&Results<'_>) -> f64| {
        runs.iter()
            .map(|run| format!("{:.0}", value(run)))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    row(&format!("storage {}", names.join(" / ")), String::new());
    row("  HTTP uploads (/s)", each(&|run| run.uploads_per_second));
    row(
        "  drain (jobs/s)",
        each(&|run| run.args.jobs as f64 / run.drained.drain_seconds.max(f64::EPSILON)),
    );
    row(
        "  steady commit → finish p99 (ms)",
        runs.iter()
            .map(|run| format!("{:.2}", run.latency.finish_p99))
            .collect::<Vec<_>>()
            .join(" / "),
    );
}

/// One line of a report's table: the measure's name, then its value.
pub fn row(name: &str, value: String) {
    println!("  {name:<44} {value}");
}

fn mebibytes(bytes: u64) -> f64 {
    bytes as f64 / 1048576.0
}
