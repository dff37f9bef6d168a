//! `quire-admin storage migrate`: copies an install's objects from its old local folder
//! to the configured store (`[storage]`: S3), through
//! `quire_shared::actions::storage_migration`. Problems and the summary go to stdout,
//! progress to stderr.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use quire_shared::actions::storage_migration::{self, Ending, Event, Options, ProblemKind};
use quire_shared::config::{Settings, StorageBackend};
use quire_shared::storage::{LocalStore, ObjectStore};

use super::connect;

#[derive(Debug, Subcommand)]
pub enum StorageCommand {
    /// Copy every object a row names from a local folder to the configured store (set
    /// storage.backend = "s3" and [storage.s3] first), reading each back and comparing
    /// its size and SHA-256 with the row. Run it again to continue a run that stopped;
    /// objects at the target already, verified, are not copied again.
    Migrate(MigrateArgs),
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The folder the install stored its objects in until now (its storage.data_dir).
    #[arg(long)]
    pub from_dir: PathBuf,
    /// Objects copied at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub concurrency: u16,
    /// Stop after this many copies (objects already at the target do not count); the
    /// next run continues.
    #[arg(long)]
    pub max_objects: Option<u64>,
}

/// Progress lines at most this often.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

pub async fn run(command: StorageCommand, settings: &Settings) -> anyhow::Result<()> {
    match command {
        StorageCommand::Migrate(args) => migrate(args, settings).await,
    }
}

async fn migrate(args: MigrateArgs, settings: &Settings) -> anyhow::Result<()> {
    let from_dir = std::fs::canonicalize(&args.from_dir)
        .with_context(|| format!("cannot open --from-dir {}", args.from_dir.display()))?;
    if !from_dir.is_dir() {
        bail!("--from-dir {} is not a folder", from_dir.display());
    }
    let source = LocalStore::new(&from_dir);
    let target = target_store(settings, &from_dir)?;
    let pool = connect(settings).await?;
    let stop = quire_shared::shutdown::on_signal();
    exit_on_second_signal(stop.clone());
    let options = Options {
        concurrency: usize::from(args.concurrency),
        max_copies: args.max_objects,
        ..Options::default()
    };
    let mut last_progress: Option<Instant> = None;
    let mut on_event = |event: Event<'_>| match event {
        Event::Progress(tally) => {
            let due = last_progress.is_none_or(|at| at.elapsed() >= PROGRESS_EVERY);
            if due || tally.examined == tally.total {
                last_progress = Some(Instant::now());
                eprintln!(
                    "progress: {} of {} objects, {} copied ({}), {} present, {} problems",
                    tally.examined,
                    tally.total,
                    tally.copied,
                    bytes(tally.bytes_copied),
                    tally.present,
                    tally.problems
                );
            }
        }
        Event::Problem(problem) => println!(
            "problem\t{}\t{}\t(recorded {} bytes, sha256 {})",
            problem.storage_key,
            describe(&problem.kind),
            problem.expected.size_bytes,
            problem.expected.sha256
        ),
    };
    let report = storage_migration::migrate(
        &pool,
        &source,
        target.as_ref(),
        &options,
        &stop,
        &mut on_event,
    )
    .await
    .context("failed to migrate the storage")?;
    let tally = &report.tally;
    println!(
        "examined {} of {} objects: {} copied ({}), {} already present, {} gone meanwhile, {} problems",
        tally.examined,
        tally.total,
        tally.copied,
        bytes(tally.bytes_copied),
        tally.present,
        tally.gone,
        tally.problems
    );
    tracing::info!(
        examined = tally.examined,
        copied = tally.copied,
        present = tally.present,
        problems = tally.problems,
        ending = ?report.ending,
        "storage migration ended"
    );
    if tally.problems > 0 {
        bail!(
            "{} objects are not at the target with their recorded digest (listed above); \
             fix them and run again",
            tally.problems
        );
    }
    match report.ending {
        Ending::Complete => println!("complete: every named object is at the target, verified"),
        Ending::LimitReached => {
            println!("stopped after --max-objects copies: run again to continue");
        }
        Ending::Interrupted => bail!("interrupted: run again to continue"),
    }
    Ok(())
}

/// The configured store, which must not be the source folder itself.
fn target_store(settings: &Settings, from_dir: &Path) -> anyhow::Result<Arc<dyn ObjectStore>> {
    let storage = &settings.storage;
    if storage.backend == StorageBackend::Local
        && std::fs::canonicalize(&storage.data_dir).is_ok_and(|dir| dir == from_dir)
    {
        bail!(
            "the configured store is --from-dir itself: set storage.backend = \"s3\" and \
             [storage.s3] (or another storage.data_dir) for the target"
        );
    }
    quire_shared::storage::build(storage).context("failed to set up the configured store")
}

/// A second ctrl-c does not wait for the copies under way.
fn exit_on_second_signal(stop: tokio_util::sync::CancellationToken) {
    tokio::spawn(async move {
        stop.cancelled().await;
        eprintln!("stopping after the copies under way (ctrl-c again to quit at once)");
        if tokio::signal::ctrl_c().await.is_ok() {
            std::process::exit(130);
        }
    });
}

fn describe(kind: &ProblemKind) -> String {
    match kind {
        ProblemKind::UnusableKey => "the row's key is not a storage key".to_owned(),
        ProblemKind::SourceMissing => "missing from --from-dir".to_owned(),
        ProblemKind::SourceMismatch { found: Some(found) } => format!(
            "the source differs from its row: {} bytes, sha256 {} (not copied)",
            found.size_bytes, found.sha256
        ),
        ProblemKind::SourceMismatch { found: None } => {
            "the source is larger than its row records (not copied)".to_owned()
        }
        ProblemKind::TargetMismatch { found } => format!(
            "read back from the target different: {} bytes, sha256 {}",
            found.size_bytes, found.sha256
        ),
        ProblemKind::Failed(error) => error.clone(),
    }
}

/// `1.5 MiB`.
fn bytes(count: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = count as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{count} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}
