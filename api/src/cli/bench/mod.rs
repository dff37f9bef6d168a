//! `quire-admin bench`: measures the real stack. It starts a dispatcher and
//! `--workers` worker processes (the binaries beside this one) on the configured
//! PostgreSQL and Redis, in a Redis namespace and a tenant of their own, and measures:
//!
//! - direct enqueue: N jobs from one client, `--enqueue-batch` per statement (one at a
//!   time by default), each statement committed before the next: bare jobs for the
//!   no-op workload, each with its document and version rows for the integrity one;
//! - drain: the N pre-enqueued jobs, first start to last finish (database clock);
//! - steady latency at a fixed rate: commit → start and commit → finish percentiles,
//!   and the outbox lag (commit → published), from the moment the bench asks for each
//!   commit (this machine's clock, which PostgreSQL shares) to the database's
//!   `started_at`, `finished_at` and `published_at`;
//! - HTTP uploads: multipart uploads from concurrent clients to a `quire-api` of its own
//!   (their jobs are cancelled afterwards: the upload path is what is measured);
//! - CPU seconds per 1,000 jobs and peak RSS of each process (from /proc), and database
//!   commits per job (pg_stat_database) over the drain.
//!
//! It prints one JSON line, then a table. Timings are never asserted by any test.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use diesel::QueryableByName;
use diesel::sql_types::{Array, BigInt, Double, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use quire_shared::config::Settings;
use quire_shared::db::documents::NewDocument;
use quire_shared::db::intake::{self, NewIntake};
use quire_shared::db::jobs::{self, NewJob};
use quire_shared::db::{DbError, PgPool, members, tenants};
use quire_shared::jobs::{BackgroundJob, BenchNoop, VerifyDocument};
use quire_shared::permissions::MemberSpec;
use quire_shared::states::TenantStatus;
use quire_shared::storage::{LocalStore, ObjectStore, StorageKey, put_digested};
use serde_json::json;
use time::OffsetDateTime;
use tokio::process::{Child, Command};
use uuid::Uuid;

mod uploads;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Jobs that do nothing: the queue's own cost.
    Noop,
    /// verify-document on stored files of --file-size bytes (SHA-256 and size).
    Integrity,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Jobs enqueued directly, then drained.
    #[arg(long, default_value_t = 5000)]
    jobs: usize,
    #[arg(long, value_enum, default_value = "noop")]
    workload: Workload,
    /// Slots of the worker process.
    #[arg(long, default_value_t = 16)]
    slots: usize,
    /// Jobs per second of the steady run (0: no steady run).
    #[arg(long, default_value_t = 50)]
    rate: u32,
    /// Seconds of the steady run.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// File size of the integrity workload and of the HTTP uploads.
    #[arg(long, default_value_t = 65_536)]
    file_size: usize,
    /// Worker processes, each with --slots slots.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Jobs per enqueue statement (and commit) of the direct enqueue run; the steady run
    /// always enqueues one at a time.
    #[arg(long, default_value_t = 1)]
    enqueue_batch: usize,
    /// Events the dispatcher claims and publishes per round (its `batch_size`).
    #[arg(long)]
    batch_size: Option<u32>,
    /// Multipart uploads to a quire-api process of the bench's own (0: no upload run).
    #[arg(long, default_value_t = 2000)]
    uploads: usize,
    /// Concurrent HTTP clients of the upload run.
    #[arg(long, default_value_t = 16)]
    upload_clients: usize,
}

struct Stack {
    dispatcher: Child,
    workers: Vec<Child>,
}

impl Stack {
    fn start(namespace: &str, args: &BenchArgs) -> anyhow::Result<Self> {
        let mut dispatcher = Command::new(sibling("quire-dispatcher")?);
        if let Some(batch_size) = args.batch_size {
            dispatcher.env("QUIRE__DISPATCHER__BATCH_SIZE", batch_size.to_string());
        }
        let workers = (0..args.workers)
            .map(|_| {
                let mut worker = Command::new(sibling("quire-worker")?);
                worker.env("QUIRE__WORKER__CONCURRENCY", args.slots.to_string());
                // What the worker asks for: a connection per slot, the claim's and the completer's.
                worker.env("QUIRE__DATABASE__POOL_SIZE", (args.slots + 2).to_string());
                spawn(worker, namespace)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Self {
            dispatcher: spawn(dispatcher, namespace)?,
            workers,
        })
    }

    /// CPU seconds of the dispatcher and of all workers together, and peak RSS of the
    /// dispatcher and of the largest worker.
    fn usage(&self) -> ((f64, u64), (f64, u64)) {
        let workers = self
            .workers
            .iter()
            .map(usage)
            .fold((0.0, 0), |(cpu, rss), (c, r)| (cpu + c, rss.max(r)));
        (usage(&self.dispatcher), workers)
    }

    async fn stop(mut self) {
        let _ = self.dispatcher.kill().await;
        for worker in &mut self.workers {
            let _ = worker.kill().await;
        }
    }
}

fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find quire-admin's own path")?;
    let path = exe.with_file_name(name);
    if !path.exists() {
        bail!(
            "{} is missing: build every binary (cargo build --release --bins)",
            path.display()
        );
    }
    Ok(path)
}

/// Starts a process of the stack in the bench's Redis namespace, quiet, killed with the
/// bench.
fn spawn(mut command: Command, namespace: &str) -> anyhow::Result<Child> {
    command
        .env("QUIRE__REDIS__NAMESPACE", namespace)
        .env("QUIRE__DISPATCHER__PROBE_LISTEN", "")
        .env("QUIRE__WORKER__PROBE_LISTEN", "")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("failed to start {:?}", command.as_std().get_program()))
}

/// CPU seconds (user + system) and peak RSS in bytes of a running process.
fn usage(child: &Child) -> (f64, u64) {
    let Some(pid) = child.id() else {
        return (0.0, 0);
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name; the
    // kernel counts them in USER_HZ, which is 100 on Linux.
    let ticks = |index: usize| {
        fields
            .get(index)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let cpu = (ticks(11) + ticks(12)) / 100.0;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let peak_kib = status
        .lines()
        .find(|line| line.starts_with("VmHWM:"))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|kib| kib.parse::<u64>().ok())
        .unwrap_or(0);
    (cpu, peak_kib * 1024)
}

#[derive(diesel::QueryableByName)]
struct Commits {
    #[diesel(sql_type = BigInt)]
    commits: i64,
}

async fn commits(conn: &mut AsyncPgConnection) -> Result<i64, DbError> {
    Ok(diesel::sql_query(
        "SELECT xact_commit AS commits FROM pg_stat_database WHERE datname = current_database()",
    )
    .get_result::<Commits>(conn)
    .await?
    .commits)
}

#[derive(diesel::QueryableByName, Default)]
struct Spans {
    #[diesel(sql_type = BigInt)]
    finished: i64,
    #[diesel(sql_type = BigInt)]
    succeeded: i64,
    #[diesel(sql_type = Double)]
    drain_seconds: f64,
    #[diesel(sql_type = Double)]
    start_p50: f64,
    #[diesel(sql_type = Double)]
    start_p95: f64,
    #[diesel(sql_type = Double)]
    start_p99: f64,
    #[diesel(sql_type = Double)]
    start_max: f64,
    #[diesel(sql_type = Double)]
    finish_p50: f64,
    #[diesel(sql_type = Double)]
    finish_p95: f64,
    #[diesel(sql_type = Double)]
    finish_p99: f64,
    #[diesel(sql_type = Double)]
    finish_max: f64,
    #[diesel(sql_type = Double)]
    publish_p50: f64,
    #[diesel(sql_type = Double)]
    publish_p99: f64,
    // The path of a job, medians of each leg: commit → the dispatcher's claim of its
    // event (NOTIFY and wake-up), that claim → marked published (claim statement, push,
    // the mark's start), that claim → the worker's claim (the push, the pop and the
    // claim statement's start), the worker's claim → its finish.
    #[diesel(sql_type = Double)]
    hop_wake_p50: f64,
    #[diesel(sql_type = Double)]
    hop_publish_p50: f64,
    #[diesel(sql_type = Double)]
    hop_pickup_p50: f64,
    #[diesel(sql_type = Double)]
    hop_run_p50: f64,
}

/// A job the bench enqueued, and when it asked for the commit (this machine's clock,
/// which PostgreSQL shares): the start of every "commit → …" span.
#[derive(Debug, Clone, Copy)]
struct Committed {
    job_id: Uuid,
    at: OffsetDateTime,
}

/// Counts and timings of `jobs`, in milliseconds (drain in s): starts, finishes and
/// publications from the database clock, commits from the bench's.
async fn spans(conn: &mut AsyncPgConnection, jobs: &[Committed]) -> Result<Spans, DbError> {
    let ids: Vec<Uuid> = jobs.iter().map(|job| job.job_id).collect();
    let commits: Vec<OffsetDateTime> = jobs.iter().map(|job| job.at).collect();
    Ok(diesel::sql_query(
        "WITH c AS (SELECT * FROM unnest($1::uuid[], $2::timestamptz[]) AS c(id, committed_at)), \
         j AS (SELECT p.*, c.committed_at FROM processing_jobs p JOIN c ON p.id = c.id), \
         e AS (SELECT e.*, j.committed_at, j.started_at, j.finished_at \
               FROM outbox_events e JOIN j ON e.job_id = j.id) \
         SELECT count(*) FILTER (WHERE j.finished_at IS NOT NULL) AS finished, \
           count(*) FILTER (WHERE j.status = 'SUCCEEDED') AS succeeded, \
           coalesce(extract(epoch FROM max(j.finished_at) - min(j.started_at)), 0)::float8 AS drain_seconds, \
           coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM j.started_at - j.committed_at) * 1000), 0)::float8 AS start_p50, \
           coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM j.started_at - j.committed_at) * 1000), 0)::float8 AS start_p95, \
           coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM j.started_at - j.committed_at) * 1000), 0)::float8 AS start_p99, \
           coalesce(max(extract(epoch FROM j.started_at - j.committed_at) * 1000), 0)::float8 AS start_max, \
           coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM j.finished_at - j.committed_at) * 1000), 0)::float8 AS finish_p50, \
           coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM j.finished_at - j.committed_at) * 1000), 0)::float8 AS finish_p95, \
           coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM j.finished_at - j.committed_at) * 1000), 0)::float8 AS finish_p99, \
           coalesce(max(extract(epoch FROM j.finished_at - j.committed_at) * 1000), 0)::float8 AS finish_max, \
           coalesce((SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM published_at - committed_at) * 1000) FROM e), 0)::float8 AS publish_p50, \
           coalesce((SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM published_at - committed_at) * 1000) FROM e), 0)::float8 AS publish_p99, \
           coalesce((SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM claimed_at - committed_at) * 1000) FROM e), 0)::float8 AS hop_wake_p50, \
           coalesce((SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM published_at - claimed_at) * 1000) FROM e), 0)::float8 AS hop_publish_p50, \
           coalesce((SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - claimed_at) * 1000) FROM e), 0)::float8 AS hop_pickup_p50, \
           coalesce((SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at) * 1000) FROM e), 0)::float8 AS hop_run_p50 \
         FROM j",
    )
    .bind::<Array<SqlUuid>, _>(ids)
    .bind::<Array<Timestamptz>, _>(commits)
    .get_result(conn)
    .await?)
}

#[derive(QueryableByName)]
struct Remaining {
    #[diesel(sql_type = BigInt)]
    remaining: i64,
}

/// Jobs of the bench's tenant and type still queued or running. Cheap (the partial
/// indexes of queued and running jobs), so polling it does not slow the drain it
/// watches: computing the spans over every job on each poll took a third of a core.
async fn remaining(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    job_type: &str,
) -> Result<i64, DbError> {
    Ok(diesel::sql_query(
        "SELECT (SELECT count(*) FROM processing_jobs \
                 WHERE status = 'QUEUED' AND job_type = $2 AND tenant_id = $1) \
              + (SELECT count(*) FROM processing_jobs \
                 WHERE status = 'RUNNING' AND job_type = $2 AND tenant_id = $1) AS remaining",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<Text, _>(job_type)
    .get_result::<Remaining>(conn)
    .await?
    .remaining)
}

/// Waits until none of the bench's jobs is queued or running, then measures `jobs`.
async fn wait_finished(bench: &Bench, pool: &PgPool, jobs: &[Committed]) -> anyhow::Result<Spans> {
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut conn = pool.get().await?;
    loop {
        let left = remaining(&mut conn, bench.tenant_id, bench.job_type()).await?;
        if left == 0 {
            break;
        }
        if Instant::now() > deadline {
            bail!("{left} jobs still unfinished after 600s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let spans = spans(&mut conn, jobs).await?;
    if spans.finished as usize != jobs.len() {
        bail!("only {} of {} jobs finished", spans.finished, jobs.len());
    }
    Ok(spans)
}

struct Bench {
    settings: Settings,
    tenant_id: Uuid,
    workload: Workload,
    file_size: usize,
}

impl Bench {
    fn job_type(&self) -> &'static str {
        match self.workload {
            Workload::Noop => BenchNoop::JOB_TYPE,
            Workload::Integrity => VerifyDocument::JOB_TYPE,
        }
    }

    /// Stored files and their rows for the integrity workload, made before any timing.
    async fn prepare(&self, count: usize) -> anyhow::Result<Vec<NewDocument>> {
        if self.workload == Workload::Noop {
            return Ok(Vec::new());
        }
        let store = LocalStore::new(&self.settings.storage.data_dir);
        let mut prepared = Vec::with_capacity(count);
        for index in 0..count {
            let (id, version_id) = (Uuid::now_v7(), Uuid::now_v7());
            let key = StorageKey::document_source(self.tenant_id, version_id);
            let mut bytes = vec![0u8; self.file_size];
            bytes[..16].copy_from_slice(id.as_bytes());
            let body = futures_util::stream::once(async move { Ok(bytes::Bytes::from(bytes)) });
            let digest =
                put_digested(&store as &dyn ObjectStore, &key, Box::pin(body), u64::MAX).await?;
            prepared.push(NewDocument {
                id,
                tenant_id: self.tenant_id,
                title: format!("bench {index}"),
                version_id,
                storage_key: key.as_str().to_owned(),
                size_bytes: i64::try_from(digest.size_bytes)?,
                sha256: digest.sha256,
                content_type: "application/octet-stream".to_owned(),
                original_filename: None,
            });
        }
        Ok(prepared)
    }

    /// Jobs `range` of the run with their outbox events, in ONE statement committed on
    /// its own: bare jobs for the no-op workload, each with its document and version rows
    /// for the integrity workload (`prepared` holds those documents).
    async fn enqueue(
        &self,
        conn: &mut AsyncPgConnection,
        range: std::ops::Range<usize>,
        prepared: &[NewDocument],
    ) -> anyhow::Result<Vec<Committed>> {
        let tenant_id = self.tenant_id;
        // One statement: its commit is asked for when it is sent.
        let at = OffsetDateTime::now_utc();
        let job_ids: Vec<Uuid> = match self.workload {
            Workload::Noop => {
                let jobs: Vec<_> = range
                    .map(|_| NewJob::new(tenant_id, BenchNoop {}, 3, None))
                    .collect();
                jobs::enqueue_many(conn, &jobs)
                    .await?
                    .into_iter()
                    .map(|enqueued| {
                        enqueued
                            .map(|enqueued| enqueued.job_id)
                            .context("a bench job collided with an active one")
                    })
                    .collect::<anyhow::Result<_>>()?
            }
            Workload::Integrity => {
                let documents = prepared
                    .get(range)
                    .context("fewer documents prepared than jobs")?;
                let intakes: Vec<_> = documents
                    .iter()
                    .map(|document| NewIntake {
                        document: document.clone(),
                        job: NewJob::new(
                            tenant_id,
                            VerifyDocument {
                                document_id: document.id,
                                document_version_id: document.version_id,
                            },
                            3,
                            None,
                        ),
                    })
                    .collect();
                intake::record(conn, &intakes)
                    .await?
                    .into_iter()
                    .map(|recorded| recorded.job.id)
                    .collect()
            }
        };
        Ok(job_ids
            .into_iter()
            .map(|job_id| Committed { job_id, at })
            .collect())
    }
}

fn table_row(name: &str, value: String) {
    println!("  {name:<44} {value}");
}

pub async fn run(settings: Settings, args: BenchArgs) -> anyhow::Result<()> {
    let pool = super::connect(&settings).await?;
    let suffix = &Uuid::new_v4().simple().to_string()[..8];
    let namespace = format!("bench-{suffix}");
    let user_id = Uuid::now_v7();
    let tenant_id = {
        let mut conn = pool.get().await?;
        let tenant =
            tenants::create_tenant(&mut conn, &format!("bench-{suffix}"), TenantStatus::Active)
                .await?;
        members::materialize(&mut conn, tenant.id, &[MemberSpec::User(user_id)]).await?;
        tenant.id
    };
    let bench = Bench {
        settings: settings.clone(),
        tenant_id,
        workload: args.workload,
        file_size: args.file_size,
    };
    eprintln!("bench: tenant bench-{suffix}, redis namespace {namespace}");

    // Direct enqueue, nothing consuming yet.
    let prepared = bench.prepare(args.jobs).await?;
    let mut conn = pool.get().await?;
    let started = Instant::now();
    let mut backlog = Vec::with_capacity(args.jobs);
    let batch = args.enqueue_batch.max(1);
    for start in (0..args.jobs).step_by(batch) {
        let range = start..(start + batch).min(args.jobs);
        backlog.extend(bench.enqueue(&mut conn, range, &prepared).await?);
    }
    let enqueue_seconds = started.elapsed().as_secs_f64();
    let commits_before = commits(&mut conn).await?;

    // Drain: start the processes; the database clock times first start to last finish.
    let stack = Stack::start(&namespace, &args)?;
    let drained = wait_finished(&bench, &pool, &backlog).await?;
    let commits_after = commits(&mut conn).await?;
    let ((dispatcher_cpu, _), (worker_cpu, _)) = stack.usage();

    // Steady run at a fixed rate.
    let steady_jobs = (u64::from(args.rate) * args.seconds) as usize;
    let prepared = bench.prepare(steady_jobs).await?;
    let mut steady = Vec::with_capacity(steady_jobs);
    if steady_jobs > 0 {
        let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(args.rate)));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        for index in 0..steady_jobs {
            ticks.tick().await;
            steady.extend(
                bench
                    .enqueue(&mut conn, index..index + 1, &prepared)
                    .await?,
            );
        }
    }
    let latency = if steady.is_empty() {
        Spans::default()
    } else {
        wait_finished(&bench, &pool, &steady).await?
    };
    let ((_, dispatcher_rss), (_, worker_rss)) = stack.usage();
    stack.stop().await;

    // HTTP uploads with nothing consuming; their analyze jobs are withdrawn afterwards.
    let uploads = if args.uploads == 0 {
        None
    } else {
        let run = uploads::run(uploads::UploadPlan {
            settings: &settings,
            namespace: &namespace,
            tenant_id,
            user_id,
            count: args.uploads,
            clients: args.upload_clients,
            file_size: args.file_size,
        })
        .await?;
        jobs::cancel_jobs(&mut conn, &run.job_ids, "bench uploads are not analyzed").await?;
        Some(run)
    };
    let uploads_per_second = uploads.as_ref().map_or(0.0, |run| run.uploads_per_second);
    let api_rss = uploads.as_ref().map_or(0, |run| run.api_peak_rss);

    let jobs = args.jobs as f64;
    let per_thousand = |cpu: f64| if jobs > 0.0 { cpu / jobs * 1000.0 } else { 0.0 };
    let report = json!({
        "workload": format!("{:?}", args.workload).to_lowercase(),
        "jobs": args.jobs,
        "slots": args.slots,
        "workers": args.workers,
        "dispatcher_batch_size": args.batch_size.map_or(settings.dispatcher.batch_size, i64::from),
        "succeeded": drained.succeeded,
        "enqueue_jobs_per_second": jobs / enqueue_seconds.max(f64::EPSILON),
        "enqueue_batch": batch,
        "http_uploads_per_second": uploads_per_second,
        "upload_clients": args.upload_clients,
        "drain_jobs_per_second": jobs / drained.drain_seconds.max(f64::EPSILON),
        "db_commits_per_job": (commits_after - commits_before) as f64 / jobs.max(1.0),
        "cpu_seconds_per_1000_jobs": { "dispatcher": per_thousand(dispatcher_cpu), "worker": per_thousand(worker_cpu) },
        "peak_rss_bytes": { "dispatcher": dispatcher_rss, "worker": worker_rss, "api": api_rss },
        "steady": {
            "rate": args.rate, "jobs": steady.len(), "succeeded": latency.succeeded,
            "commit_to_start_ms": { "p50": latency.start_p50, "p95": latency.start_p95, "p99": latency.start_p99, "max": latency.start_max },
            "commit_to_finish_ms": { "p50": latency.finish_p50, "p95": latency.finish_p95, "p99": latency.finish_p99, "max": latency.finish_max },
            "outbox_lag_ms": { "p50": latency.publish_p50, "p99": latency.publish_p99 },
            "path_p50_ms": {
                "commit_to_dispatcher_claim": latency.hop_wake_p50,
                "dispatcher_claim_to_published": latency.hop_publish_p50,
                "dispatcher_claim_to_worker_claim": latency.hop_pickup_p50,
                "worker_claim_to_finish": latency.hop_run_p50,
            },
        },
    });
    println!("{report}");
    println!();
    table_row("workload", report["workload"].to_string());
    table_row(
        &format!("direct enqueue (jobs/s, one client, {batch} per commit)"),
        format!(
            "{:.0}",
            report["enqueue_jobs_per_second"].as_f64().unwrap_or(0.0)
        ),
    );
    table_row(
        &format!(
            "HTTP uploads of {} bytes (/s, {} clients)",
            args.file_size, args.upload_clients
        ),
        format!("{uploads_per_second:.0}"),
    );
    table_row(
        "drain (jobs/s)",
        format!(
            "{:.0}",
            report["drain_jobs_per_second"].as_f64().unwrap_or(0.0)
        ),
    );
    table_row(
        "database commits per job (drain)",
        format!(
            "{:.2}",
            report["db_commits_per_job"].as_f64().unwrap_or(0.0)
        ),
    );
    table_row(
        "CPU s per 1,000 jobs: dispatcher / worker",
        format!(
            "{:.3} / {:.3}",
            per_thousand(dispatcher_cpu),
            per_thousand(worker_cpu)
        ),
    );
    table_row(
        "peak RSS MiB: dispatcher / worker / api",
        format!(
            "{:.1} / {:.1} / {:.1}",
            dispatcher_rss as f64 / 1048576.0,
            worker_rss as f64 / 1048576.0,
            api_rss as f64 / 1048576.0
        ),
    );
    table_row(
        &format!(
            "steady {} jobs/s: commit → start p50/p95/p99/max ms",
            args.rate
        ),
        format!(
            "{:.2} / {:.2} / {:.2} / {:.2}",
            latency.start_p50, latency.start_p95, latency.start_p99, latency.start_max
        ),
    );
    table_row(
        &format!(
            "steady {} jobs/s: commit → finish p50/p95/p99/max ms",
            args.rate
        ),
        format!(
            "{:.2} / {:.2} / {:.2} / {:.2}",
            latency.finish_p50, latency.finish_p95, latency.finish_p99, latency.finish_max
        ),
    );
    table_row(
        "outbox lag p50/p99 ms",
        format!("{:.2} / {:.2}", latency.publish_p50, latency.publish_p99),
    );
    table_row(
        "path p50 ms: to dispatcher / to worker / run",
        format!(
            "{:.2} / {:.2} / {:.2} (published {:.2} after the dispatcher's claim)",
            latency.hop_wake_p50,
            latency.hop_pickup_p50,
            latency.hop_run_p50,
            latency.hop_publish_p50
        ),
    );
    if drained.succeeded as usize != args.jobs || latency.succeeded as usize != steady.len() {
        bail!("not every bench job succeeded");
    }
    Ok(())
}
