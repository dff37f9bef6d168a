//! `--workload analyze`: the analyze pipeline against its own tools (issue 18). The bench
//! makes a corpus (`corpus.rs`), has the pipeline analyze each file once in process to
//! record the tool runs it makes (`by_hand.rs`), then for 1 slot and for the machine's
//! cores: runs those tools by hand over `--corpus-sets` × slots copies of the corpus, and
//! has Quire analyze as many fresh documents of the same files (a dispatcher and one
//! worker with that many slots), and reports documents and pages per second, CPU per
//! page, peak RSS of the tree and Quire's overhead over its tools (`figures.rs`).

mod by_hand;
mod cgroup;
mod corpus;
mod figures;
mod tree;

use std::num::NonZeroUsize;

use anyhow::{Context, bail};
use quire_shared::analysis::Analyzer;
use quire_shared::config::Settings;
use quire_shared::db::PgPool;
use quire_shared::db::documents::NewDocument;
use quire_shared::db::intake::{self, NewIntake};
use quire_shared::db::jobs::NewJob;
use quire_shared::db::tenants::{self, TenantWrite};
use quire_shared::jobs::{AnalyzeDocument, BackgroundJob};
use quire_shared::states::TenantStatus;
use quire_shared::storage::{self, StorageKey, put_digested};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::args::BenchArgs;
use crate::measure::{Committed, wait_finished};
use crate::stack::{Scope, Stack};
use by_hand::Document;
use cgroup::CpuGroup;
use corpus::CorpusFile;
use figures::{Pass, Report, Runner};
use tree::PeakSampler;

pub async fn run(settings: Settings, args: &BenchArgs, pool: &PgPool) -> anyhow::Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    let mut concurrencies = vec![1];
    if cores > 1 {
        concurrencies.push(cores);
    }
    eprintln!("analyze: making the corpus");
    let corpus = tokio::task::spawn_blocking(corpus::make)
        .await
        .context("the corpus maker panicked")??;
    let corpus = corpus::only(corpus, &args.corpus_files)?;
    eprintln!("analyze: the pipeline analyzes each file once, its tool runs recorded");
    let analyzer = Analyzer::new(settings.analysis.clone());
    let recorded = by_hand::record(&analyzer, &corpus).await?;
    for (file, recorded) in corpus.iter().zip(&recorded) {
        let programs: Vec<String> = recorded
            .runs
            .iter()
            .filter_map(|run| run.program.file_name())
            .map(|name| name.to_string_lossy().into_owned())
            .collect();
        eprintln!("analyze: {} runs {}", file.name, programs.join(", "));
    }

    let suffix = Uuid::new_v4().simple().to_string()[..8].to_owned();
    let tenant_id = {
        let mut conn = pool.get().await?;
        tenants::create_tenant(
            &mut conn,
            &format!("bench-analyze-{suffix}"),
            TenantStatus::Active,
        )
        .await?
        .id
    };
    let me = i32::try_from(std::process::id()).context("the bench's pid")?;
    let mut passes = Vec::new();
    for &slots in &concurrencies {
        let copies = args.corpus_sets.max(1) * slots;
        let documents = copies * corpus.len();
        let pages = copies as u64 * corpus.iter().map(|file| u64::from(file.pages)).sum::<u64>();

        eprintln!("analyze: {documents} documents by hand, {slots} at once");
        let copied = (0..copies)
            .flat_map(|_| recorded.iter())
            .map(Document::copy_of)
            .collect::<anyhow::Result<Vec<_>>>()?;
        // The bench's children are the tools alone now (no stack is running).
        let cpu_before = tree::children_cpu_seconds(me);
        let sampler = PeakSampler::start(vec![me], false);
        let ran = by_hand::run(copied, slots).await?;
        let peak_rss_bytes = sampler.stop().await;
        passes.push(Pass {
            runner: Runner::ByHand,
            slots,
            documents,
            pages,
            wall_seconds: ran.wall_seconds,
            cpu_seconds: tree::children_cpu_seconds(me) - cpu_before,
            peak_rss_bytes,
            failed_runs: ran.failed_runs,
            tools_cpu_counted: true,
        });

        eprintln!("analyze: {documents} documents through Quire, {slots} slot(s)");
        let plan = QuirePass {
            settings: &settings,
            args,
            pool,
            tenant_id,
            namespace: format!("bench-analyze-{suffix}-{slots}"),
            corpus: &corpus,
            copies,
            pages,
            slots,
        };
        passes.push(plan.run().await?);
    }
    drop(recorded);

    let report = Report {
        cores,
        corpus: corpus
            .iter()
            .map(|file| (file.name.clone(), file.pages))
            .collect(),
        passes,
    };
    println!("{}", report.json());
    println!();
    report.print_table();
    Ok(())
}

/// One pass of Quire's own: `copies` of each corpus file stored and recorded as new
/// documents with their analyze jobs (one statement, nothing consuming), then a
/// dispatcher and one worker with `slots` slots started on them.
struct QuirePass<'a> {
    settings: &'a Settings,
    args: &'a BenchArgs,
    pool: &'a PgPool,
    tenant_id: Uuid,
    namespace: String,
    corpus: &'a [CorpusFile],
    copies: usize,
    /// The pages of those copies.
    pages: u64,
    slots: usize,
}

impl QuirePass<'_> {
    async fn run(self) -> anyhow::Result<Pass> {
        let intakes = self.store().await?;
        let documents = intakes.len();
        let mut conn = self.pool.get().await?;
        let tenant = TenantWrite {
            tenant_id: self.tenant_id,
            generation: None,
        };
        let recorded = intake::record(&mut conn, &tenant, &intakes, None).await??;
        let at = OffsetDateTime::now_utc();
        let committed: Vec<Committed> = recorded
            .into_iter()
            .map(|recorded| Committed {
                job_id: recorded.job.id,
                at,
            })
            .collect();
        drop(conn);

        let scope = Scope {
            namespace: self.namespace.clone(),
            storage: None,
        };
        let stack_args = BenchArgs {
            slots: self.slots,
            workers: 1,
            ..self.args.clone()
        };
        let group = CpuGroup::create(&format!("quire-{}", self.namespace));
        let stack = Stack::start(&scope, &stack_args)?;
        let workers = stack.worker_pids();
        // At once: the worker starts its first tool only after it has connected.
        let group = group.filter(|group| {
            workers.iter().all(|pid| {
                group
                    .adopt(*pid)
                    .inspect_err(|error| {
                        tracing::warn!(%error, path = %group.path().display(), "the worker stays outside the bench's cgroup");
                    })
                    .is_ok()
            })
        });
        let sampler = PeakSampler::start(workers.clone(), true);
        let drained = wait_finished(
            self.pool,
            self.tenant_id,
            AnalyzeDocument::JOB_TYPE,
            &committed,
            None,
        )
        .await;
        // Read before the stop: a killed worker's /proc entry is gone. Without a cgroup,
        // the worker and the children it waited for: its tools' own time is missing.
        let in_group = group.as_ref().and_then(|group| group.cpu_seconds().ok());
        let tools_cpu_counted = in_group.is_some();
        let cpu_seconds =
            in_group.unwrap_or_else(|| workers.iter().map(|pid| tree::cpu_seconds(*pid)).sum());
        let peak_rss_bytes = sampler.stop().await;
        stack.stop().await;
        if let Some(group) = group {
            group.remove().await;
        }
        let drained = drained?;
        if drained.succeeded as usize != documents {
            bail!(
                "{} of {documents} analyze jobs did not succeed (their documents say why)",
                documents - drained.succeeded as usize
            );
        }
        Ok(Pass {
            runner: Runner::Quire,
            slots: self.slots,
            documents,
            pages: self.pages,
            wall_seconds: drained.drain_seconds,
            cpu_seconds,
            peak_rss_bytes,
            failed_runs: 0,
            tools_cpu_counted,
        })
    }

    /// The pass's copies of the corpus in the object store, as an upload leaves them, and
    /// the rows that will record them.
    async fn store(&self) -> anyhow::Result<Vec<NewIntake<AnalyzeDocument>>> {
        let store =
            storage::build(&self.settings.storage).context("failed to open the object store")?;
        let mut intakes = Vec::with_capacity(self.copies * self.corpus.len());
        for copy in 0..self.copies {
            for file in self.corpus {
                let (id, version_id) = (Uuid::now_v7(), Uuid::now_v7());
                let key = StorageKey::document_source(self.tenant_id, version_id);
                let bytes = bytes::Bytes::from(file.bytes.clone());
                let body = futures_util::stream::once(async move { Ok(bytes) });
                let digest = put_digested(store.as_ref(), &key, Box::pin(body), u64::MAX).await?;
                let document = NewDocument {
                    id,
                    tenant_id: self.tenant_id,
                    title: format!("{} {copy}", file.name),
                    version_id,
                    storage_key: key.as_str().to_owned(),
                    size_bytes: i64::try_from(digest.size_bytes)?,
                    sha256: digest.sha256,
                    content_type: file.content_type.to_owned(),
                    original_filename: None,
                };
                let job = NewJob::new(
                    self.tenant_id,
                    AnalyzeDocument {
                        document_id: id,
                        document_version_id: version_id,
                        force: false,
                    },
                    3,
                    None,
                );
                intakes.push(NewIntake { document, job });
            }
        }
        Ok(intakes)
    }
}
