//! The `fairness` scenario (issue 16): how long one tenant's uploads wait while another
//! tenant's backlog drains, and what that costs the backlog. On one stack (a dispatcher,
//! `--workers` workers, an API), in one run:
//!
//! 1. **B alone**: tenant B uploads `--fairness-uploads` documents at
//!    `--fairness-rate` per second on the idle stack; commit → finish of their analyze
//!    jobs, and one job's run time (the median of worker claim → finish);
//! 2. **A alone**: tenant A enqueues `--fairness-backlog` integrity jobs (100 per
//!    commit) and the stack drains them: first start to last finish;
//! 3. **together**: A enqueues the same backlog again and, from the same moment, B
//!    uploads as in 1.
//!
//! B's commit instant is its job's `queued_at` (the upload's transaction start, database
//! clock); the other end is `finished_at`. The targets (issue 16): B's p99 together at
//! most twice its p99 alone plus one job's run time; A's drain together within 10 % of
//! its drain alone. Printed, never asserted.
//!
//! Beside them, what each round cost the whole machine in busy CPU seconds
//! (`/proc/stat`: every process of the stack, PostgreSQL and the tools included). On a
//! machine A alone keeps saturated, A's drain with B can be at most A's CPU over A's and
//! B's together: the share B's own work leaves it. The report prints that bound beside
//! the ratio measured, so a miss is told apart from what the scheduling costs.

use anyhow::{Context, bail};
use diesel_async::AsyncPgConnection;
use quire_shared::config::Settings;
use quire_shared::db::documents::NewDocument;
use quire_shared::db::jobs::{self, NewJob};
use quire_shared::db::{PgPool, members, tenants};
use quire_shared::jobs::{AnalyzeDocument, BackgroundJob, VerifyDocument};
use quire_shared::permissions::MemberSpec;
use quire_shared::states::TenantStatus;
use serde_json::json;
use std::future::Future;
use std::time::Instant;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::args::{BenchArgs, Workload};
use crate::measure::{self, Committed, Spans, wait_finished};
use crate::report::row;
use crate::stack::{Scope, Stack};
use crate::uploads::{self, Api};
use crate::usage;
use crate::workload::Bench;

/// Jobs per enqueue statement of A's backlog: a burst, as a bulk action makes one.
const BACKLOG_BATCH: usize = 100;

/// What B's uploads measured.
struct BRound {
    spans: Spans,
    uploads: usize,
}

/// What A's drain measured.
struct ARound {
    spans: Spans,
    jobs: usize,
}

/// What a round cost the whole machine.
#[derive(Debug, Clone, Copy)]
struct Cost {
    /// CPU seconds of every core busy over the round.
    busy_seconds: f64,
    wall_seconds: f64,
}

impl Cost {
    /// How busy the round kept the machine's cores, 0 to 1.
    fn load(&self) -> f64 {
        self.busy_seconds / (self.wall_seconds * usage::cores() as f64).max(f64::EPSILON)
    }
}

/// Runs `round` and measures what it cost the machine.
async fn costed<T>(round: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<(T, Cost)> {
    let (busy, started) = (usage::machine_busy_seconds()?, Instant::now());
    let value = round.await?;
    let cost = Cost {
        busy_seconds: usage::machine_busy_seconds()? - busy,
        wall_seconds: started.elapsed().as_secs_f64(),
    };
    Ok((value, cost))
}

impl ARound {
    fn jobs_per_second(&self) -> f64 {
        self.jobs as f64 / self.spans.drain_seconds.max(f64::EPSILON)
    }
}

pub async fn run(settings: Settings, args: &BenchArgs, pool: &PgPool) -> anyhow::Result<()> {
    let suffix = &Uuid::new_v4().simple().to_string()[..8];
    let namespace = format!("bench-{suffix}");
    let user_b = Uuid::now_v7();
    let (tenant_a, tenant_b) = {
        let mut conn = pool.get().await?;
        let a = tenants::create_tenant(
            &mut conn,
            &format!("bench-{suffix}-a"),
            TenantStatus::Active,
        )
        .await?;
        let b = tenants::create_tenant(
            &mut conn,
            &format!("bench-{suffix}-b"),
            TenantStatus::Active,
        )
        .await?;
        members::materialize(&mut conn, b.id, &[MemberSpec::User(user_b)]).await?;
        (a.id, b.id)
    };
    eprintln!("bench: fairness, tenants bench-{suffix}-a and -b, redis namespace {namespace}");

    // A's files and document rows, made before anything is timed. Recording them enqueues
    // a verify job each; those are withdrawn at once, so that both of A's rounds enqueue
    // the same way (bare verify jobs of existing versions).
    let bench_a = Bench {
        settings: settings.clone(),
        tenant_id: tenant_a,
        workload: Workload::Integrity,
        file_size: args.file_size,
        express: None,
    };
    let documents = bench_a.prepare(args.fairness_backlog).await?;
    {
        let mut conn = pool.get().await?;
        for start in (0..documents.len()).step_by(BACKLOG_BATCH) {
            let range = start..(start + BACKLOG_BATCH).min(documents.len());
            let recorded = bench_a.enqueue(&mut conn, range, &documents).await?;
            let ids: Vec<Uuid> = recorded.iter().map(|job| job.job_id).collect();
            jobs::cancel_jobs(&mut conn, &ids, "the fairness bench enqueues its own").await?;
        }
    }

    let scope = Scope {
        namespace,
        storage: None,
    };
    let stack = Stack::start(&scope, args)?;
    let api = Api::start(&scope, 4).await?;
    let token = uploads::token(&settings, tenant_b, user_b)?;
    let b_alone = costed(b_round(pool, &api, &token, tenant_b, args)).await;
    let a_alone = match &b_alone {
        Ok(_) => costed(a_round(pool, tenant_a, &documents)).await,
        Err(_) => Err(anyhow::anyhow!("skipped: B's round failed")),
    };
    let together = match (&b_alone, &a_alone) {
        (Ok(_), Ok(_)) => {
            costed(async {
                tokio::try_join!(
                    a_round(pool, tenant_a, &documents),
                    b_round(pool, &api, &token, tenant_b, args)
                )
            })
            .await
        }
        _ => Err(anyhow::anyhow!("skipped: an earlier round failed")),
    };
    api.stop().await;
    stack.stop().await;
    let ((b_alone, b_cost), (a_alone, a_cost)) = (b_alone?, a_alone?);
    let ((a_together, b_together), together_cost) = together?;

    let report = Report {
        args,
        b_alone: &b_alone,
        b_together: &b_together,
        a_alone: &a_alone,
        a_together: &a_together,
        costs: Costs {
            b_alone: b_cost,
            a_alone: a_cost,
            together: together_cost,
        },
    };
    report.print();
    let all_succeeded = [&b_alone, &b_together]
        .iter()
        .all(|round| round.spans.succeeded as usize == round.uploads)
        && [&a_alone, &a_together]
            .iter()
            .all(|round| round.spans.succeeded as usize == round.jobs);
    if !all_succeeded {
        bail!("not every fairness job succeeded");
    }
    Ok(())
}

/// B uploads at its rate; waits for its analyze jobs and measures them.
async fn b_round(
    pool: &PgPool,
    api: &Api,
    token: &str,
    tenant_b: Uuid,
    args: &BenchArgs,
) -> anyhow::Result<BRound> {
    let job_ids = uploads::paced(
        api,
        token,
        args.fairness_uploads,
        args.fairness_rate,
        args.file_size,
    )
    .await
    .context("tenant B's uploads")?;
    let committed = {
        let mut conn = pool.get().await?;
        measure::queued_at(&mut conn, &job_ids).await?
    };
    let spans = wait_finished(pool, tenant_b, AnalyzeDocument::JOB_TYPE, &committed, None).await?;
    Ok(BRound {
        spans,
        uploads: job_ids.len(),
    })
}

/// A enqueues a verify job for each of its documents, `BACKLOG_BATCH` per commit, and
/// the stack drains them.
async fn a_round(
    pool: &PgPool,
    tenant_a: Uuid,
    documents: &[NewDocument],
) -> anyhow::Result<ARound> {
    let mut conn = pool.get().await?;
    let mut committed = Vec::with_capacity(documents.len());
    for chunk in documents.chunks(BACKLOG_BATCH) {
        committed.extend(enqueue_verify(&mut conn, tenant_a, chunk).await?);
    }
    drop(conn);
    let spans = wait_finished(pool, tenant_a, VerifyDocument::JOB_TYPE, &committed, None).await?;
    Ok(ARound {
        spans,
        jobs: committed.len(),
    })
}

/// A verify job for each of `documents` (stored and recorded already), in one statement.
async fn enqueue_verify(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    documents: &[NewDocument],
) -> anyhow::Result<Vec<Committed>> {
    let new_jobs: Vec<_> = documents
        .iter()
        .map(|document| {
            NewJob::new(
                tenant_id,
                VerifyDocument {
                    document_id: document.id,
                    document_version_id: document.version_id,
                },
                3,
                None,
            )
        })
        .collect();
    let enqueued = jobs::enqueue_many(conn, &new_jobs).await?;
    let at = OffsetDateTime::now_utc();
    enqueued
        .into_iter()
        .map(|enqueued| {
            enqueued
                .map(|enqueued| Committed {
                    job_id: enqueued.job_id,
                    at,
                })
                .context("a verify job collided with an active one")
        })
        .collect()
}

struct Report<'a> {
    args: &'a BenchArgs,
    b_alone: &'a BRound,
    b_together: &'a BRound,
    a_alone: &'a ARound,
    a_together: &'a ARound,
    costs: Costs,
}

/// What each round cost the machine.
struct Costs {
    b_alone: Cost,
    a_alone: Cost,
    together: Cost,
}

impl Costs {
    /// A's drain with B over alone if B's work took exactly its own CPU from A, on a
    /// machine A alone keeps saturated.
    fn a_bound(&self) -> f64 {
        self.a_alone.busy_seconds
            / (self.a_alone.busy_seconds + self.b_alone.busy_seconds).max(f64::EPSILON)
    }

    /// The together round's CPU over the two alone: above 1, running them at once costs
    /// more than their sum.
    fn together_over_parts(&self) -> f64 {
        self.together.busy_seconds
            / (self.a_alone.busy_seconds + self.b_alone.busy_seconds).max(f64::EPSILON)
    }
}

impl Report<'_> {
    /// B's p99 target: twice its p99 alone plus one job's run time.
    fn b_target_ms(&self) -> f64 {
        2.0 * self.b_alone.spans.finish_p99 + self.b_alone.spans.hop_run_p50
    }

    fn a_ratio(&self) -> f64 {
        self.a_together.jobs_per_second() / self.a_alone.jobs_per_second().max(f64::EPSILON)
    }

    fn b_ratio(&self) -> f64 {
        self.b_together.spans.finish_p99 / self.b_alone.spans.finish_p99.max(f64::EPSILON)
    }

    fn json(&self) -> serde_json::Value {
        let b = |round: &BRound| {
            json!({
                "uploads": round.uploads,
                "succeeded": round.spans.succeeded,
                "commit_to_finish_ms": {
                    "p50": round.spans.finish_p50,
                    "p99": round.spans.finish_p99,
                    "max": round.spans.finish_max,
                },
                "run_p50_ms": round.spans.hop_run_p50,
            })
        };
        let a = |round: &ARound| {
            json!({
                "jobs": round.jobs,
                "succeeded": round.spans.succeeded,
                "drain_jobs_per_second": round.jobs_per_second(),
            })
        };
        json!({
            "scenario": "fairness",
            "workers": self.args.workers,
            "slots": self.args.slots,
            "b_alone": b(self.b_alone),
            "b_with_a": b(self.b_together),
            "a_alone": a(self.a_alone),
            "a_with_b": a(self.a_together),
            "b_p99_ratio": self.b_ratio(),
            "b_p99_target_ms": self.b_target_ms(),
            "b_meets_target": self.b_together.spans.finish_p99 <= self.b_target_ms(),
            "a_drain_ratio": self.a_ratio(),
            "a_meets_target": self.a_ratio() >= 0.9,
            "machine_cpu_seconds": {
                "b_alone": self.costs.b_alone.busy_seconds,
                "a_alone": self.costs.a_alone.busy_seconds,
                "together": self.costs.together.busy_seconds,
            },
            "a_alone_load": self.costs.a_alone.load(),
            "a_drain_cpu_bound": self.costs.a_bound(),
            "together_cpu_over_parts": self.costs.together_over_parts(),
        })
    }

    fn print(&self) {
        let report = self.json();
        println!("{report}");
        println!();
        let (args, b1, b2) = (self.args, &self.b_alone.spans, &self.b_together.spans);
        let verdict = |met: bool| if met { "met" } else { "missed" };
        row(
            "scenario",
            format!(
                "fairness: A {} integrity jobs, B {} uploads at {}/s",
                args.fairness_backlog, args.fairness_uploads, args.fairness_rate
            ),
        );
        row(
            "B alone: commit → finish p50 / p99 ms",
            format!(
                "{:.1} / {:.1} (run p50 {:.1})",
                b1.finish_p50, b1.finish_p99, b1.hop_run_p50
            ),
        );
        row(
            "B with A: commit → finish p50 / p99 ms",
            format!("{:.1} / {:.1}", b2.finish_p50, b2.finish_p99),
        );
        row(
            "B's p99 with A / alone",
            format!(
                "{:.2}× (target: p99 ≤ {:.1} ms, 2 × alone + one run: {})",
                self.b_ratio(),
                self.b_target_ms(),
                verdict(report["b_meets_target"] == true)
            ),
        );
        row(
            "A's drain alone / with B (jobs/s)",
            format!(
                "{:.0} / {:.0}",
                self.a_alone.jobs_per_second(),
                self.a_together.jobs_per_second()
            ),
        );
        row(
            "A's drain with B / alone",
            format!(
                "{:.2}× (target: ≥ 0.90: {})",
                self.a_ratio(),
                verdict(report["a_meets_target"] == true)
            ),
        );
        let costs = &self.costs;
        row(
            "machine CPU s: B alone / A alone / together",
            format!(
                "{:.1} / {:.1} / {:.1} ({:.1} ms per upload; A alone kept the cores {:.0} % busy)",
                costs.b_alone.busy_seconds,
                costs.a_alone.busy_seconds,
                costs.together.busy_seconds,
                1000.0 * costs.b_alone.busy_seconds / (self.b_alone.uploads.max(1) as f64),
                100.0 * costs.a_alone.load()
            ),
        );
        row(
            "A's drain ratio if B took only its own CPU",
            format!(
                "{:.2}× (together cost {:.2}× the two alone)",
                costs.a_bound(),
                costs.together_over_parts()
            ),
        );
    }
}
