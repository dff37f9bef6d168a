//! A maintenance service, River's way: one task on its own interval in its own tokio
//! task, started once and stopped any number of times. A failing pass is logged here,
//! once per run of failures, and tried again at the next interval; it never holds up
//! another service, each of which has its own loop.

use std::future::Future;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What a maintenance service does at each interval.
pub trait Task: Send + Sync + 'static {
    /// What one pass did, for the tests; the service itself only logs.
    type Report: Send;

    /// The service's name in logs (`service = …`).
    const NAME: &'static str;

    /// Does one pass. It logs what it changed; an error goes back to the service,
    /// which logs it.
    fn run_once(&self) -> impl Future<Output = anyhow::Result<Self::Report>> + Send;
}

/// A started service.
pub struct Service {
    name: &'static str,
    stop: CancellationToken,
    handle: Mutex<Option<JoinHandle<()>>>,
}

impl Service {
    /// Runs `task` every `interval`, the first pass at once, until `shutdown` or
    /// [`Service::stop`].
    pub fn start<T: Task>(task: T, interval: Duration, shutdown: &CancellationToken) -> Self {
        let stop = shutdown.child_token();
        let handle = tokio::spawn(run(task, interval, stop.clone()));
        Self {
            name: T::NAME,
            stop,
            handle: Mutex::new(Some(handle)),
        }
    }

    /// Stops the service, letting a pass in flight finish (each pass is one or a few
    /// statements). Stopping again, or after shutdown, returns at once.
    pub async fn stop(&self) {
        self.stop.cancel();
        let handle = self.handle.lock().await.take();
        if let Some(handle) = handle
            && let Err(error) = handle.await
        {
            tracing::warn!(service = self.name, %error, "maintenance service ended abnormally");
        }
    }
}

async fn run<T: Task>(task: T, interval: Duration, stop: CancellationToken) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // While PostgreSQL or Redis is down every pass fails: say so once, and once more
    // when it works again, not at every interval.
    let mut failing = false;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        match task.run_once().await {
            Ok(_) => {
                if std::mem::take(&mut failing) {
                    tracing::info!(service = T::NAME, "maintenance works again");
                }
            }
            Err(error) if !failing => {
                failing = true;
                tracing::warn!(
                    service = T::NAME,
                    error = format!("{error:#}"),
                    retry_in_ms = interval.as_millis() as u64,
                    "maintenance pass failed, trying again every interval"
                );
            }
            Err(error) => {
                tracing::debug!(
                    service = T::NAME,
                    error = format!("{error:#}"),
                    "maintenance pass failed again"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use quire_shared::test_support::eventually;

    use super::*;

    /// Fails its first `failures` passes, then succeeds; counts every pass.
    struct Counting {
        passes: Arc<AtomicUsize>,
        failures: usize,
    }

    impl Task for Counting {
        type Report = usize;
        const NAME: &'static str = "counting";

        async fn run_once(&self) -> anyhow::Result<usize> {
            let pass = self.passes.fetch_add(1, Ordering::SeqCst) + 1;
            if pass <= self.failures {
                anyhow::bail!("pass {pass} fails");
            }
            Ok(pass)
        }
    }

    fn counting(failures: usize) -> (Counting, Arc<AtomicUsize>) {
        let passes = Arc::new(AtomicUsize::new(0));
        let task = Counting {
            passes: Arc::clone(&passes),
            failures,
        };
        (task, passes)
    }

    #[tokio::test]
    async fn a_failing_pass_is_tried_again_at_the_next_interval() {
        let (task, passes) = counting(3);
        let shutdown = CancellationToken::new();
        let service = Service::start(task, Duration::from_millis(10), &shutdown);
        eventually(
            Duration::from_secs(10),
            "passes go on after failures",
            || {
                let passes = Arc::clone(&passes);
                async move { (passes.load(Ordering::SeqCst) >= 5).then_some(()) }
            },
        )
        .await;
        service.stop().await;
    }

    #[tokio::test]
    async fn a_stopped_service_runs_no_more_passes_and_stopping_twice_is_harmless() {
        let (task, passes) = counting(0);
        let shutdown = CancellationToken::new();
        let service = Service::start(task, Duration::from_millis(10), &shutdown);
        eventually(Duration::from_secs(10), "the first pass ran", || {
            let passes = Arc::clone(&passes);
            async move { (passes.load(Ordering::SeqCst) >= 1).then_some(()) }
        })
        .await;
        // `stop` returns once the loop has ended: no pass can start after it.
        service.stop().await;
        let after_stop = passes.load(Ordering::SeqCst);
        service.stop().await;
        tokio::task::yield_now().await;
        assert_eq!(passes.load(Ordering::SeqCst), after_stop);
    }

    #[tokio::test]
    async fn shutdown_stops_every_service_and_a_later_stop_returns_at_once() {
        let (first, first_passes) = counting(0);
        let (second, _) = counting(usize::MAX);
        let shutdown = CancellationToken::new();
        let first = Service::start(first, Duration::from_millis(10), &shutdown);
        let second = Service::start(second, Duration::from_millis(10), &shutdown);
        shutdown.cancel();
        first.stop().await;
        second.stop().await;
        let after = first_passes.load(Ordering::SeqCst);
        first.stop().await;
        tokio::task::yield_now().await;
        assert_eq!(first_passes.load(Ordering::SeqCst), after);
    }
}
