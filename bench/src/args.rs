//! What a bench run measures, from the command line.

use clap::{Parser, ValueEnum};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// Direct enqueue, drain, steady rate and HTTP uploads of one --workload.
    Standard,
    /// Tenant B's uploads beside tenant A's integrity backlog, and each alone
    /// (docs/benchmarks.md, "Fairness").
    Fairness,
    /// The API's reads (a page of the listing, a search) on an idle stack and beside a
    /// drain and an upload run (docs/benchmarks.md, "Reads under load").
    Reads,
    /// Enqueue and drain on an empty database, then beside --history-jobs finished jobs
    /// and their events, then a --backlog of queued jobs (docs/benchmarks.md, "Cost at
    /// scale").
    Scale,
}

/// A storage backend a run is measured on (`storage.backend` of every process).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StorageChoice {
    Local,
    S3,
}

impl StorageChoice {
    /// The value of `storage.backend`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::S3 => "s3",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Jobs that do nothing: the queue's own cost.
    Noop,
    /// verify-document on stored files of --file-size bytes (SHA-256 and size).
    Integrity,
    /// analyze-document over a corpus the bench makes (text and scanned PDFs, PNG and
    /// JPEG scans, plain text) at 1 slot and at the machine's cores, against the same
    /// tools run by hand (docs/benchmarks.md, "The analyze pipeline").
    Analyze,
}

/// Measure the real stack: enqueue, drain, steady-rate latency and HTTP uploads (see
/// docs/benchmarks.md). Run it only against a database no other dispatcher serves.
#[derive(Debug, Clone, Parser)]
#[command(name = "quire-bench", version)]
pub struct BenchArgs {
    #[arg(long, value_enum, default_value = "standard")]
    pub scenario: Scenario,
    /// Jobs enqueued directly, then drained.
    #[arg(long, default_value_t = 5000)]
    pub jobs: usize,
    #[arg(long, value_enum, default_value = "noop")]
    pub workload: Workload,
    /// Slots of the worker process.
    #[arg(long, default_value_t = 16)]
    pub slots: usize,
    /// Jobs per second of the steady run (0: no steady run).
    #[arg(long, default_value_t = 50)]
    pub rate: u32,
    /// Seconds of the steady run.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// File size of the integrity workload and of the HTTP uploads.
    #[arg(long, default_value_t = 65_536)]
    pub file_size: usize,
    /// Worker processes, each with --slots slots.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Jobs per enqueue statement (and commit) of the direct enqueue run; the steady run
    /// always enqueues one at a time.
    #[arg(long, default_value_t = 1)]
    pub enqueue_batch: usize,
    /// Events the dispatcher claims and publishes per round (its `batch_size`).
    #[arg(long)]
    pub batch_size: Option<u32>,
    /// Multipart uploads to a quire-api process of the bench's own (0: no upload run).
    #[arg(long, default_value_t = 2000)]
    pub uploads: usize,
    /// Concurrent HTTP clients of the upload run.
    #[arg(long, default_value_t = 16)]
    pub upload_clients: usize,
    /// Storage backends to run the standard scenario on, one after the other, each
    /// printed (e.g. `local,s3`); none: the backend the settings name.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub storage: Vec<StorageChoice>,
    /// Analyze: copies of the corpus per slot of a pass (each pass runs this many times
    /// its slots of each file).
    #[arg(long, default_value_t = 2)]
    pub corpus_sets: usize,
    /// Analyze: only these files of the corpus (e.g. `text-pdf-1,plain-text`); none: all.
    #[arg(long, value_delimiter = ',')]
    pub corpus_files: Vec<String>,
    /// Fairness: tenant A's integrity jobs, enqueued 100 per commit.
    #[arg(long, default_value_t = 20_000)]
    pub fairness_backlog: usize,
    /// Fairness: tenant B's uploads.
    #[arg(long, default_value_t = 50)]
    pub fairness_uploads: usize,
    /// Fairness: tenant B's uploads per second.
    #[arg(long, default_value_t = 5.0)]
    pub fairness_rate: f64,
    /// Reads: the reader tenant's documents, each with a text and its search vector.
    #[arg(long, default_value_t = 2_000)]
    pub reads_documents: usize,
    /// Reads: the integrity jobs another tenant drains during the loaded window (enough
    /// to outlast it).
    #[arg(long, default_value_t = 30_000)]
    pub reads_backlog: usize,
    /// Reads: requests per second of each read (the listing, the search), in both windows
    /// of --seconds.
    #[arg(long, default_value_t = 20.0)]
    pub reads_rate: f64,
    /// Scale: finished jobs of history seeded between the empty and the history phase.
    #[arg(long, default_value_t = 10_000_000)]
    pub history_jobs: u64,
    /// Scale: outbox events per finished job (a retry or a rescue adds one).
    #[arg(long, default_value_t = 2)]
    pub history_events_per_job: u32,
    /// Scale: tenants the history belongs to besides the measured one, which holds half.
    #[arg(long, default_value_t = 10)]
    pub history_tenants: usize,
    /// Scale: no-op jobs queued at once, then drained by the stack.
    #[arg(long, default_value_t = 1_000_000)]
    pub backlog: usize,
    /// Scale: seconds at the start of the backlog's drain during which PostgreSQL logs the
    /// plan of every statement (auto_explain, which must be loaded: `scripts/bench
    /// scale`); 0: none.
    #[arg(long, default_value_t = 0)]
    pub plans_seconds: u64,
}
