//! `quire-bench`: measures the real stack. It starts a dispatcher and `--workers` worker
//! processes (the binaries beside this one) on the configured PostgreSQL and Redis, in a
//! Redis namespace and a tenant of their own, and measures:
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
//! `--scenario fairness` measures instead one tenant's uploads beside another tenant's
//! backlog, and each alone (`fairness.rs`); `--scenario reads` the API's reads on an idle
//! stack and beside a drain and an upload run (`reads.rs`); `--workload analyze` the analyze pipeline
//! over a corpus of real files against the same tools run by hand (`analyze/`).
//!
//! `--storage local,s3` runs all of it once per storage backend named (every process of
//! a run on that backend) and prints each run, then the two side by side.
//!
//! It prints one JSON line per run, then a table per run. Timings are never asserted by any test.
//!
//! A crate of its own, not a `quire-admin` command: its raw SQL, /proc reading and
//! process launching have no place in the API's build.

mod analyze;
mod args;
mod fairness;
mod measure;
mod reads;
mod report;
mod scale;
mod stack;
mod uploads;
mod usage;
mod workload;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use quire_shared::config::Settings;
use quire_shared::db::{self, PgPool, jobs, members, tenants};
use quire_shared::permissions::MemberSpec;
use quire_shared::publishing::Express;
use quire_shared::states::TenantStatus;
use uuid::Uuid;

pub use args::{BenchArgs, Scenario, StorageChoice, Workload};

use measure::{Spans, commits, wait_finished};
use report::Results;
use stack::{Scope, Stack};
use usage::Usage;
use workload::Bench;

pub async fn run(settings: Settings, args: BenchArgs) -> anyhow::Result<()> {
    let pool = db::build_pool(&settings.database)?;
    db::ping(&pool)
        .await
        .context("failed to connect to the database")?;
    if args.scenario == Scenario::Fairness {
        return fairness::run(settings, &args, &pool).await;
    }
    if args.scenario == Scenario::Reads {
        return reads::run(settings, &args, &pool).await;
    }
    if args.scenario == Scenario::Scale {
        return scale::run(settings, &args, &pool).await;
    }
    if args.workload == Workload::Analyze {
        return analyze::run(settings, &args, &pool).await;
    }
    // One run per storage backend named (or one on the configured backend), each on a
    // tenant and namespace of its own; every JSON line first, then each table.
    let choices: Vec<Option<StorageChoice>> = if args.storage.is_empty() {
        vec![None]
    } else {
        args.storage.iter().copied().map(Some).collect()
    };
    let mut runs = Vec::with_capacity(choices.len());
    for choice in choices {
        runs.push(run_standard(&settings, &args, &pool, choice).await?);
    }
    for results in &runs {
        println!("{}", results.json());
    }
    for results in &runs {
        println!();
        results.print_table();
    }
    report::print_storage_comparison(&runs);
    let failed = runs.iter().any(|results| {
        results.drained.succeeded as usize != args.jobs
            || results.latency.succeeded as usize != results.steady_jobs
    });
    if failed {
        bail!("not every bench job succeeded");
    }
    Ok(())
}

/// A tenant of the bench's own, active, with one member (the uploads' user).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BenchTenant {
    pub id: Uuid,
    pub user_id: Uuid,
}

pub(crate) async fn create_tenant(pool: &PgPool, name: &str) -> anyhow::Result<BenchTenant> {
    let user_id = Uuid::now_v7();
    let mut conn = pool.get().await?;
    let tenant = tenants::create_tenant(&mut conn, name, TenantStatus::Active).await?;
    members::materialize(&mut conn, tenant.id, &[MemberSpec::User(user_id)]).await?;
    Ok(BenchTenant {
        id: tenant.id,
        user_id,
    })
}

/// The standard scenario on one storage backend (`None`: the configured one).
async fn run_standard<'a>(
    settings: &Settings,
    args: &'a BenchArgs,
    pool: &PgPool,
    storage: Option<StorageChoice>,
) -> anyhow::Result<Results<'a>> {
    let settings = stack::with_storage(settings, storage)
        .context("failed to load the settings of a storage run")?;
    let storage_name = stack::storage_name(storage);
    let suffix = &Uuid::new_v4().simple().to_string()[..8];
    let scope = Scope {
        namespace: format!("bench-{suffix}"),
        storage,
    };
    let tenant = create_tenant(pool, &format!("bench-{suffix}")).await?;
    eprintln!(
        "bench: tenant bench-{suffix}, redis namespace {}, storage {storage_name}",
        scope.namespace
    );
    run_in_tenant(&settings, args, pool, &scope, tenant, storage_name).await
}

/// Runs `count` jobs, unmeasured, and waits for them: a steady run with no drain before
/// it would otherwise start beside the processes' own start (connecting, registering the
/// worker, filling the pools), and its first jobs' latency would hold that: up to
/// 0.9 s, enough to make a 10 s run's p99. The peers' trickle runs on warm workers
/// too, after their drain (`bench/peers/bench.py`).
async fn warm_up(
    bench: &Bench,
    conn: &mut diesel_async::AsyncPgConnection,
    pool: &PgPool,
    count: usize,
) -> anyhow::Result<()> {
    let prepared = bench.prepare(count).await?;
    let jobs = bench.enqueue(conn, 0..count, &prepared).await?;
    wait_finished(
        pool,
        bench.tenant_id,
        bench.job_type(),
        &jobs,
        bench.express.as_deref(),
    )
    .await?;
    Ok(())
}

/// The standard scenario's runs in `tenant`, on `scope`: direct enqueue, drain, steady
/// rate and (unless `--uploads 0`) HTTP uploads.
pub(crate) async fn run_in_tenant<'a>(
    settings: &Settings,
    args: &'a BenchArgs,
    pool: &PgPool,
    scope: &Scope,
    tenant: BenchTenant,
    storage_name: String,
) -> anyhow::Result<Results<'a>> {
    let BenchTenant {
        id: tenant_id,
        user_id,
    } = tenant;
    // The express path publishes in the run's own namespace, as the API it starts does.
    let mut scoped = settings.clone();
    scoped.redis.namespace = scope.namespace.clone();
    let redis = quire_shared::redis_client::RedisPool::build(&scoped.redis)
        .context("failed to set up the redis pool")?;
    let bench = Bench {
        settings: settings.clone(),
        tenant_id,
        workload: args.workload,
        file_size: args.file_size,
        express: Express::from_settings(&scoped, "bench", pool.clone(), redis).map(Arc::new),
    };

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
    let stack = Stack::start(scope, args)?;
    let drained = wait_finished(
        pool,
        tenant_id,
        bench.job_type(),
        &backlog,
        bench.express.as_deref(),
    )
    .await?;
    let commits_after = commits(&mut conn).await?;
    let (dispatcher_drain, worker_drain) = stack.usage();

    // Steady run at a fixed rate.
    let steady_jobs = (u64::from(args.rate) * args.seconds) as usize;
    if args.jobs == 0 && steady_jobs > 0 {
        warm_up(&bench, &mut conn, pool, args.slots * args.workers.max(1)).await?;
    }
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
        wait_finished(
            pool,
            tenant_id,
            bench.job_type(),
            &steady,
            bench.express.as_deref(),
        )
        .await?
    };
    let (dispatcher_end, worker_end) = stack.usage();
    stack.stop().await;

    // HTTP uploads with nothing consuming; their analyze jobs are withdrawn afterwards.
    let uploads = if args.uploads == 0 {
        None
    } else {
        let run = uploads::run(uploads::UploadPlan {
            settings,
            scope,
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

    Ok(Results {
        args,
        storage: storage_name,
        dispatcher_batch_size: args
            .batch_size
            .map_or(settings.dispatcher.batch_size, i64::from),
        enqueue_batch: batch,
        enqueue_seconds,
        drained,
        drain_commits: commits_after - commits_before,
        // CPU is what the drain cost; peak RSS is the largest over both runs.
        dispatcher: Usage {
            cpu_seconds: dispatcher_drain.cpu_seconds,
            peak_rss_bytes: dispatcher_end.peak_rss_bytes,
        },
        worker: Usage {
            cpu_seconds: worker_drain.cpu_seconds,
            peak_rss_bytes: worker_end.peak_rss_bytes,
        },
        steady_jobs: steady.len(),
        latency,
        uploads_per_second: uploads.as_ref().map_or(0.0, |run| run.uploads_per_second),
        api_peak_rss: uploads.as_ref().map_or(0, |run| run.api_peak_rss),
    })
}
