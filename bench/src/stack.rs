//! The processes a bench drains with: one dispatcher and `--workers` workers, on the
//! shared process launcher, in the bench's Redis namespace and on its storage backend.

use quire_shared::config::{Settings, SettingsError, SettingsSource};
use quire_shared::process::{Launch, ProcessError, QuireProcess};

use crate::args::{BenchArgs, StorageChoice, Workload};
use crate::usage::Usage;

/// The variable that sets `storage.backend` for a run's processes and for the bench.
const BACKEND_VARIABLE: &str = "QUIRE__STORAGE__BACKEND";

/// What every process of one bench run shares beyond the bench's environment: a Redis
/// namespace of its own and, when the run names one, the storage backend.
#[derive(Debug, Clone)]
pub struct Scope {
    pub namespace: String,
    /// `None`: the backend the settings name.
    pub storage: Option<StorageChoice>,
}

pub struct Stack {
    dispatcher: QuireProcess,
    workers: Vec<QuireProcess>,
}

impl Stack {
    pub fn start(scope: &Scope, args: &BenchArgs) -> Result<Self, ProcessError> {
        // A bench measures its own workload: no periodic job beside it.
        let mut dispatcher = launch("quire-dispatcher", scope)?
            .env("QUIRE__SCHEDULES__EMPTY_TRASH__ENABLED", "false")
            .env("QUIRE__SCHEDULES__INTEGRITY_SCRUB__ENABLED", "false")
            .env("QUIRE__SCHEDULES__STORAGE_GC__ENABLED", "false");
        if let Some(batch_size) = args.batch_size {
            dispatcher = dispatcher.env("QUIRE__DISPATCHER__BATCH_SIZE", batch_size.to_string());
        }
        let workers = (0..args.workers)
            .map(|_| {
                // Its pool is the worker's own default: a connection per slot, the
                // claim's and the completer's.
                let worker = launch("quire-worker", scope)?
                    .env("QUIRE__WORKER__CONCURRENCY", args.slots.to_string());
                // An analyze pass runs --slots analyses at once, as its by-hand pass runs
                // the tools; any other workload runs with the default analysis slots.
                match args.workload {
                    Workload::Analyze => worker.env(
                        "QUIRE__WORKER__ANALYSIS_CONCURRENCY",
                        args.slots.to_string(),
                    ),
                    Workload::Noop | Workload::Integrity => worker,
                }
                .spawn()
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            dispatcher: dispatcher.spawn()?,
            workers,
        })
    }

    /// The dispatcher's usage, and the workers' together (CPU summed, the largest peak
    /// RSS).
    pub fn usage(&self) -> (Usage, Usage) {
        let workers = self
            .workers
            .iter()
            .map(Usage::of)
            .fold(Usage::default(), Usage::combine);
        (Usage::of(&self.dispatcher), workers)
    }

    /// The process ids of the workers still running.
    pub fn worker_pids(&self) -> Vec<i32> {
        self.workers
            .iter()
            .filter_map(|worker| worker.id().and_then(|pid| i32::try_from(pid).ok()))
            .collect()
    }

    pub async fn stop(mut self) {
        self.dispatcher.kill().await;
        for worker in &mut self.workers {
            worker.kill().await;
        }
    }
}

/// A process of the bench's stack: the bench's environment (its settings), in the run's
/// Redis namespace and on its storage backend, quiet, without probe or admin listeners
/// (their fixed ports would collide between workers, and with a stack already running on
/// this host).
pub fn launch(binary: &str, scope: &Scope) -> Result<Launch, ProcessError> {
    let mut launch = Launch::new(binary)?;
    if let Some(storage) = scope.storage {
        launch = launch.env(BACKEND_VARIABLE, storage.as_str());
    }
    Ok(launch
        .env("QUIRE__REDIS__NAMESPACE", &scope.namespace)
        .env("QUIRE__DISPATCHER__PROBE_LISTEN", "")
        .env("QUIRE__WORKER__PROBE_LISTEN", "")
        .env("QUIRE__SERVER__ADMIN_LISTEN", "")
        .env("RUST_LOG", "warn"))
}

/// The bench's settings for a run on `choice` (the configured backend for `None`): read
/// again from the same files and environment the run's processes get, with the same
/// `QUIRE__STORAGE__BACKEND` that [`launch`] gives them, so the files the bench stores
/// itself land where its workers read them.
pub fn with_storage(
    settings: &Settings,
    choice: Option<StorageChoice>,
) -> Result<Settings, SettingsError> {
    let Some(choice) = choice else {
        return Ok(settings.clone());
    };
    let mut source = SettingsSource::from_process_env()?;
    source
        .env
        .insert(BACKEND_VARIABLE.to_owned(), choice.as_str().to_owned());
    Settings::from_source(&source)
}

/// The name of the storage backend of a run on `choice`, for the report: for `None`, what
/// the environment names, else the default (local).
pub fn storage_name(choice: Option<StorageChoice>) -> String {
    match choice {
        Some(choice) => choice.as_str().to_owned(),
        None => std::env::var(BACKEND_VARIABLE).unwrap_or_else(|_| "local".to_owned()),
    }
}
