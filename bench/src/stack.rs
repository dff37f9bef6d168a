//! The processes a bench drains with: one dispatcher and `--workers` workers, on the
//! shared process launcher, in the bench's Redis namespace.

use quire_shared::process::{Launch, ProcessError, QuireProcess};

use crate::args::BenchArgs;
use crate::usage::Usage;

pub struct Stack {
    dispatcher: QuireProcess,
    workers: Vec<QuireProcess>,
}

impl Stack {
    pub fn start(namespace: &str, args: &BenchArgs) -> Result<Self, ProcessError> {
        // A bench measures its own workload: no trash emptying or scrub beside it.
        let mut dispatcher = launch("quire-dispatcher", namespace)?
            .env("QUIRE__SCHEDULES__EMPTY_TRASH__ENABLED", "false")
            .env("QUIRE__SCHEDULES__INTEGRITY_SCRUB__ENABLED", "false");
        if let Some(batch_size) = args.batch_size {
            dispatcher = dispatcher.env("QUIRE__DISPATCHER__BATCH_SIZE", batch_size.to_string());
        }
        let workers = (0..args.workers)
            .map(|_| {
                launch("quire-worker", namespace)?
                    .env("QUIRE__WORKER__CONCURRENCY", args.slots.to_string())
                    // What the worker asks for: a connection per slot, the claim's and the
                    // completer's.
                    .env("QUIRE__DATABASE__POOL_SIZE", (args.slots + 2).to_string())
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

    pub async fn stop(mut self) {
        self.dispatcher.kill().await;
        for worker in &mut self.workers {
            worker.kill().await;
        }
    }
}

/// A process of the bench's stack: the bench's environment (its settings), in the bench's
/// Redis namespace, quiet, without probe or admin listeners (their fixed ports would
/// collide between workers, and with a stack already running on this host).
pub fn launch(binary: &str, namespace: &str) -> Result<Launch, ProcessError> {
    Ok(Launch::new(binary)?
        .env("QUIRE__REDIS__NAMESPACE", namespace)
        .env("QUIRE__DISPATCHER__PROBE_LISTEN", "")
        .env("QUIRE__WORKER__PROBE_LISTEN", "")
        .env("QUIRE__SERVER__ADMIN_LISTEN", "")
        .env("RUST_LOG", "warn"))
}
