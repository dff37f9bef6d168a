//! The `reads` scenario (issue 19, item 6): how fast the API answers a client's reads
//! while the stack works. On one stack (a dispatcher, `--workers` workers, an API):
//!
//! 1. A reader tenant gets `--reads-documents` documents, recorded as the API records an
//!    upload, each with a text of its own and its search vector (their verify jobs are
//!    withdrawn: the reads are measured, not those jobs).
//! 2. **idle**: nothing else runs; the first page of `GET /api/documents` and a search
//!    (`GET /api/documents/search`), each at `--reads-rate` requests per second for
//!    `--seconds`.
//! 3. **loaded**: tenant A enqueues `--reads-backlog` integrity jobs (100 per commit)
//!    and tenant C uploads from `--upload-clients` clients without pause (their analyze
//!    jobs run too); once both are going, the same reads for the same time. Then the
//!    uploads stop and every job still queued or running is withdrawn.
//!
//! The reads are an open loop: each request starts on its tick in a task of its own, so
//! a slow answer never delays the next request (no coordinated omission). A request's
//! latency is from its start to the last byte of its body, on the bench's clock. The
//! report prints p50 and p99 of each read idle and loaded, their ratios, and what the
//! load did meanwhile (A's finished jobs and C's uploads per second), so a loaded figure
//! is never read without the load it stood beside. Printed, never asserted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use diesel::sql_types::{BigInt, Uuid as SqlUuid};
// Its `load` would shadow the atomics' own: they are called by their type's name here.
use diesel_async::RunQueryDsl;
use quire_shared::config::Settings;
use quire_shared::db::{PgPool, jobs, members, tenants};
use quire_shared::jobs::{BackgroundJob, VerifyDocument};
use quire_shared::permissions::MemberSpec;
use quire_shared::states::TenantStatus;
use serde_json::json;
use uuid::Uuid;

use crate::args::{BenchArgs, Workload};
use crate::measure;
use crate::report::row;
use crate::stack::{Scope, Stack};
use crate::uploads::{self, Api, ApiClient};
use crate::usage;
use crate::workload::Bench;

/// Documents recorded (and A's jobs enqueued) per commit.
const BATCH: usize = 100;

/// One document of every `SEARCH_EVERY` is a quarterly invoice, the words the search
/// looks for: it ranks a realistic share of the tenant's documents, not all nor one.
const SEARCH_EVERY: i64 = 10;

/// The `limit` both reads ask for.
const PAGE_SIZE: usize = 50;
/// The two reads, as a client sends them (`limit` = [`PAGE_SIZE`]).
const LIST_PATH: &str = "/api/documents?limit=50";
const SEARCH_PATH: &str = "/api/documents/search?q=quarterly%20invoice&limit=50";

/// Latencies of one read over one window, in milliseconds.
#[derive(Debug, Default)]
struct Latencies {
    samples: Vec<f64>,
    failed: usize,
}

impl Latencies {
    /// The `p` quantile (nearest rank); 0 without samples.
    fn quantile(&self, p: f64) -> f64 {
        let mut sorted = self.samples.clone();
        sorted.sort_by(f64::total_cmp);
        let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1));
        sorted.get(rank - 1).copied().unwrap_or(0.0)
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "requests": self.samples.len(),
            "failed": self.failed,
            "p50_ms": self.quantile(0.5),
            "p99_ms": self.quantile(0.99),
            "max_ms": self.quantile(1.0),
        })
    }
}

/// Both reads over one window.
#[derive(Debug, Default)]
struct Window {
    list: Latencies,
    search: Latencies,
    /// How busy the machine's cores were over the window, 0 to 1 (`/proc/stat`: every
    /// process, the bench's own client included).
    machine_load: f64,
}

/// What the load did while the loaded window's reads ran.
#[derive(Debug, Default)]
struct Load {
    seconds: f64,
    /// A's integrity jobs finished within the window.
    a_finished: i64,
    /// A's jobs still queued or running when the window ended (0: the backlog ran out
    /// before the window did, and the reads' last part stood beside less load).
    a_left: i64,
    /// C's uploads answered within the window.
    uploads: usize,
}

pub async fn run(settings: Settings, args: &BenchArgs, pool: &PgPool) -> anyhow::Result<()> {
    let suffix = &Uuid::new_v4().simple().to_string()[..8];
    let namespace = format!("bench-{suffix}");
    let (reader_user, uploader_user) = (Uuid::now_v7(), Uuid::now_v7());
    let mut conn = pool.get().await?;
    let mut tenant_ids = Vec::with_capacity(3);
    for role in ["r", "a", "c"] {
        let name = format!("bench-{suffix}-{role}");
        tenant_ids.push(
            tenants::create_tenant(&mut conn, &name, TenantStatus::Active)
                .await?
                .id,
        );
    }
    let (tenant_r, tenant_a, tenant_c) = (tenant_ids[0], tenant_ids[1], tenant_ids[2]);
    members::materialize(&mut conn, tenant_r, &[MemberSpec::User(reader_user)]).await?;
    members::materialize(&mut conn, tenant_c, &[MemberSpec::User(uploader_user)]).await?;
    drop(conn);
    eprintln!("bench: reads, tenants bench-{suffix}-r, -a and -c, redis namespace {namespace}");

    seed_reader(&settings, args, pool, tenant_r).await?;
    let bench_a = Bench {
        settings: settings.clone(),
        tenant_id: tenant_a,
        workload: Workload::Integrity,
        file_size: args.file_size,
        express: None,
    };
    let backlog = bench_a.prepare(args.reads_backlog).await?;

    let scope = Scope {
        namespace,
        storage: None,
    };
    let stack = Stack::start(&scope, args)?;
    let api = Api::start(&scope, args.upload_clients + 8).await?;
    let reader_token = uploads::token(&settings, tenant_r, reader_user)?;
    let uploader_token = uploads::token(&settings, tenant_c, uploader_user)?;
    let window = Duration::from_secs(args.seconds.max(1));

    let idle = async {
        check_reads(&api, &reader_token, args.reads_documents).await?;
        reads(api.client(), &reader_token, args.reads_rate, window).await
    }
    .await;
    let loaded = match &idle {
        Ok(_) => {
            loaded_window(
                pool,
                &api,
                &bench_a,
                &backlog,
                &reader_token,
                &uploader_token,
                args,
                window,
            )
            .await
        }
        Err(_) => Err(anyhow::anyhow!("skipped: the idle reads failed")),
    };
    // Whatever the load left is withdrawn once the stack has stopped: with its dispatcher
    // still marking the backlog's events, one cancel of thousands of jobs met a row moved
    // to the delivered partition on each of its runs (`db::moved`) and gave up.
    api.stop().await;
    stack.stop().await;
    let withdrawn = withdraw(pool, &[tenant_a, tenant_c]).await;
    let (idle, (loaded, load)) = (idle?, loaded?);
    withdrawn?;

    let report = Report {
        args,
        idle: &idle,
        loaded: &loaded,
        load: &load,
    };
    report.print();
    let failed = [&idle.list, &idle.search, &loaded.list, &loaded.search]
        .iter()
        .map(|latencies| latencies.failed)
        .sum::<usize>();
    if failed > 0 {
        bail!("{failed} reads failed");
    }
    Ok(())
}

/// The reader tenant's documents: stored and recorded as an upload records them, each
/// with a text and its search vector, their verify jobs withdrawn.
async fn seed_reader(
    settings: &Settings,
    args: &BenchArgs,
    pool: &PgPool,
    tenant_r: Uuid,
) -> anyhow::Result<()> {
    let bench = Bench {
        settings: settings.clone(),
        tenant_id: tenant_r,
        workload: Workload::Integrity,
        // Small files: the reads never open them.
        file_size: 1024,
        express: None,
    };
    let documents = bench.prepare(args.reads_documents).await?;
    let mut conn = pool.get().await?;
    for start in (0..documents.len()).step_by(BATCH) {
        let range = start..(start + BATCH).min(documents.len());
        let recorded = bench.enqueue(&mut conn, range, &documents).await?;
        let ids: Vec<Uuid> = recorded.iter().map(|job| job.job_id).collect();
        jobs::cancel_jobs(&mut conn, &ids, "the reads bench measures reads").await?;
    }
    // A letter of about 3 KB each, numbered so no two are alike; every SEARCH_EVERY-th
    // is a quarterly invoice. Then the index, as the pipeline's index step builds it.
    diesel::sql_query(
        "UPDATE documents d SET content_text = \
           'Letter ' || n.n || ' to our customers. ' \
           || CASE WHEN n.n % $2 = 0 THEN 'Your quarterly invoice is attached. ' ELSE '' END \
           || repeat('We write to tell you about the state of your account number ' \
                     || n.n || ' and what changes next month. ', 30) \
         FROM (SELECT id, row_number() OVER (ORDER BY id) AS n \
               FROM documents WHERE tenant_id = $1) n \
         WHERE d.id = n.id",
    )
    .bind::<SqlUuid, _>(tenant_r)
    .bind::<BigInt, _>(SEARCH_EVERY)
    .execute(&mut conn)
    .await
    .context("failed to write the reader's texts")?;
    diesel::sql_query("SELECT quire_reindex_document(id) FROM documents WHERE tenant_id = $1")
        .bind::<SqlUuid, _>(tenant_r)
        .execute(&mut conn)
        .await
        .context("failed to index the reader's documents")?;
    // Fresh statistics, as autovacuum would have them on a tenant that grew over time.
    diesel::sql_query("ANALYZE documents")
        .execute(&mut conn)
        .await?;
    Ok(())
}

/// The loaded window: A's backlog enqueued and C's uploads going, then the reads; what
/// the load did during the reads.
#[allow(clippy::too_many_arguments)]
async fn loaded_window(
    pool: &PgPool,
    api: &Api,
    bench_a: &Bench,
    backlog: &[quire_shared::db::documents::NewDocument],
    reader_token: &str,
    uploader_token: &str,
    args: &BenchArgs,
    window: Duration,
) -> anyhow::Result<(Window, Load)> {
    let mut conn = pool.get().await?;
    for start in (0..backlog.len()).step_by(BATCH) {
        let range = start..(start + BATCH).min(backlog.len());
        bench_a.enqueue(&mut conn, range, backlog).await?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let uploaders: Vec<_> = (0..args.upload_clients.max(1))
        .map(|_| {
            let (client, token) = (api.client(), uploader_token.to_owned());
            let (stop, answered, size) = (stop.clone(), answered.clone(), args.file_size);
            tokio::spawn(async move {
                while !AtomicBool::load(&stop, Ordering::Relaxed) {
                    client.upload(&token, uploads::body(size)).await?;
                    answered.fetch_add(1, Ordering::Relaxed);
                }
                anyhow::Ok(())
            })
        })
        .collect();
    // The uploads are going once every client has had an answer.
    let deadline = Instant::now() + Duration::from_secs(30);
    while AtomicUsize::load(&answered, Ordering::Relaxed) < args.upload_clients.max(1) {
        if Instant::now() > deadline {
            bail!("the load's uploads did not start in 30 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let (finished_before, uploads_before) = (
        finished(&mut conn, bench_a.tenant_id).await?,
        AtomicUsize::load(&answered, Ordering::Relaxed),
    );
    let started = Instant::now();
    let reads = reads(api.client(), reader_token, args.reads_rate, window).await;
    let seconds = started.elapsed().as_secs_f64();
    let uploads = AtomicUsize::load(&answered, Ordering::Relaxed) - uploads_before;
    let a_finished = finished(&mut conn, bench_a.tenant_id).await? - finished_before;
    let a_left = measure::remaining(&mut conn, bench_a.tenant_id, VerifyDocument::JOB_TYPE).await?;
    stop.store(true, Ordering::Relaxed);
    for uploader in uploaders {
        uploader.await.context("an upload client panicked")??;
    }
    Ok((
        reads?,
        Load {
            seconds,
            a_finished,
            a_left,
            uploads,
        },
    ))
}

/// Both reads at `per_second` each for `window`, every request in a task of its own.
async fn reads(
    client: ApiClient,
    token: &str,
    per_second: f64,
    window: Duration,
) -> anyhow::Result<Window> {
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / per_second.max(0.1)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let (busy, started) = (usage::machine_busy_seconds()?, Instant::now());
    let end = started + window;
    let (mut list, mut search) = (Vec::new(), Vec::new());
    while Instant::now() < end {
        ticks.tick().await;
        for (path, into) in [(LIST_PATH, &mut list), (SEARCH_PATH, &mut search)] {
            let (client, token) = (client.clone(), token.to_owned());
            into.push(tokio::spawn(
                async move { client.timed_get(&token, path).await },
            ));
        }
    }
    let busy = usage::machine_busy_seconds()? - busy;
    let mut window = Window {
        machine_load: busy
            / (started.elapsed().as_secs_f64() * usage::cores() as f64).max(f64::EPSILON),
        ..Window::default()
    };
    for (tasks, into) in [(list, &mut window.list), (search, &mut window.search)] {
        for task in tasks {
            match task.await.context("a read task panicked")? {
                Ok((elapsed, _)) => into.samples.push(elapsed.as_secs_f64() * 1000.0),
                Err(error) => {
                    if into.failed == 0 {
                        eprintln!("bench: a read failed: {error:#}");
                    }
                    into.failed += 1;
                }
            }
        }
    }
    Ok(window)
}

/// Both reads answer what the seed holds: a full first page of the listing, and a
/// search that finds the quarterly invoices (a search that found nothing would be
/// measured as fast as it is useless).
async fn check_reads(api: &Api, token: &str, documents: usize) -> anyhow::Result<()> {
    let client = api.client();
    for (path, expected) in [
        (LIST_PATH, documents.min(PAGE_SIZE)),
        (
            SEARCH_PATH,
            (documents / SEARCH_EVERY as usize).min(PAGE_SIZE),
        ),
    ] {
        let (_, body) = client.timed_get(token, path).await?;
        let page: serde_json::Value =
            serde_json::from_slice(&body).with_context(|| format!("GET {path}: not JSON"))?;
        let found = page["documents"].as_array().map_or(0, Vec::len);
        if found != expected {
            bail!("GET {path} gave {found} documents, {expected} expected");
        }
    }
    Ok(())
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    count: i64,
}

/// A's integrity jobs finished so far.
async fn finished(
    conn: &mut diesel_async::AsyncPgConnection,
    tenant_id: Uuid,
) -> anyhow::Result<i64> {
    Ok(diesel::sql_query(
        "SELECT count(*) AS count FROM processing_jobs \
         WHERE tenant_id = $1 AND job_type = $2 AND status = 'SUCCEEDED'",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<diesel::sql_types::Text, _>(VerifyDocument::JOB_TYPE)
    .get_result::<Count>(conn)
    .await?
    .count)
}

/// Withdraws every job of `tenant_ids` still queued or running.
async fn withdraw(pool: &PgPool, tenant_ids: &[Uuid]) -> anyhow::Result<()> {
    #[derive(diesel::QueryableByName)]
    struct Id {
        #[diesel(sql_type = SqlUuid)]
        id: Uuid,
    }
    let mut conn = pool.get().await?;
    let ids: Vec<Uuid> = diesel::sql_query(
        "SELECT id FROM processing_jobs \
         WHERE tenant_id = ANY($1) AND status IN ('QUEUED', 'RUNNING')",
    )
    .bind::<diesel::sql_types::Array<SqlUuid>, _>(tenant_ids)
    .load::<Id>(&mut conn)
    .await?
    .into_iter()
    .map(|row| row.id)
    .collect();
    jobs::cancel_jobs(&mut conn, &ids, "the reads bench is over").await?;
    Ok(())
}

struct Report<'a> {
    args: &'a BenchArgs,
    idle: &'a Window,
    loaded: &'a Window,
    load: &'a Load,
}

impl Report<'_> {
    fn json(&self) -> serde_json::Value {
        let ratio = |loaded: &Latencies, idle: &Latencies, p: f64| {
            loaded.quantile(p) / idle.quantile(p).max(f64::EPSILON)
        };
        let seconds = self.load.seconds.max(f64::EPSILON);
        json!({
            "scenario": "reads",
            "workers": self.args.workers,
            "slots": self.args.slots,
            "documents": self.args.reads_documents,
            "reads_per_second_each": self.args.reads_rate,
            "list_idle": self.idle.list.json(),
            "list_loaded": self.loaded.list.json(),
            "search_idle": self.idle.search.json(),
            "search_loaded": self.loaded.search.json(),
            "list_p50_ratio": ratio(&self.loaded.list, &self.idle.list, 0.5),
            "list_p99_ratio": ratio(&self.loaded.list, &self.idle.list, 0.99),
            "search_p50_ratio": ratio(&self.loaded.search, &self.idle.search, 0.5),
            "search_p99_ratio": ratio(&self.loaded.search, &self.idle.search, 0.99),
            "machine_load_idle": self.idle.machine_load,
            "machine_load_loaded": self.loaded.machine_load,
            "load": {
                "seconds": self.load.seconds,
                "a_jobs_per_second": self.load.a_finished as f64 / seconds,
                "a_left_at_end": self.load.a_left,
                "c_uploads_per_second": self.load.uploads as f64 / seconds,
            },
        })
    }

    fn print(&self) {
        let report = self.json();
        println!("{report}");
        println!();
        let args = self.args;
        row(
            "scenario",
            format!(
                "reads: {} documents, list and search at {}/s each for {} s",
                args.reads_documents, args.reads_rate, args.seconds
            ),
        );
        for (name, idle, loaded) in [
            ("list", &self.idle.list, &self.loaded.list),
            ("search", &self.idle.search, &self.loaded.search),
        ] {
            row(
                &format!("{name} p50 / p99 ms: idle"),
                format!("{:.2} / {:.2}", idle.quantile(0.5), idle.quantile(0.99)),
            );
            row(
                &format!("{name} p50 / p99 ms: loaded"),
                format!(
                    "{:.2} / {:.2} ({:.2}× / {:.2}× idle)",
                    loaded.quantile(0.5),
                    loaded.quantile(0.99),
                    loaded.quantile(0.5) / idle.quantile(0.5).max(f64::EPSILON),
                    loaded.quantile(0.99) / idle.quantile(0.99).max(f64::EPSILON)
                ),
            );
        }
        let seconds = self.load.seconds.max(f64::EPSILON);
        row(
            "the load meanwhile",
            format!(
                "A drained {:.0} jobs/s ({} left at the end), C uploaded {:.0}/s",
                self.load.a_finished as f64 / seconds,
                self.load.a_left,
                self.load.uploads as f64 / seconds
            ),
        );
        row(
            "cores busy: idle / loaded",
            format!(
                "{:.0} % / {:.0} %",
                100.0 * self.idle.machine_load,
                100.0 * self.loaded.machine_load
            ),
        );
    }
}
