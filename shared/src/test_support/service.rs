//! A worker or a dispatcher started in-process by a test. The library cannot name
//! `quire_worker::run` or `quire_dispatcher::run` (the binaries depend on it, not it on
//! them), so each test harness passes the `run` it starts.

use std::future::Future;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::Settings;

/// A started service: [`RunningService::drain`] stops it as SIGTERM would and waits for
/// it to finish. Cancelling the parent token it was started under stops it too.
pub struct RunningService {
    pub stop: CancellationToken,
    pub handle: JoinHandle<anyhow::Result<()>>,
}

impl RunningService {
    /// Runs `run(settings, stop)` on the runtime, `stop` a child of `parent`.
    pub fn spawn<F, Fut>(run: F, settings: Settings, parent: &CancellationToken) -> Self
    where
        F: FnOnce(Settings, CancellationToken) -> Fut,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let stop = parent.child_token();
        let handle = tokio::spawn(run(settings, stop.clone()));
        Self { stop, handle }
    }

    /// Cancels the service and waits until it has drained; panics if it failed.
    pub async fn drain(self) {
        self.stop.cancel();
        self.handle
            .await
            .expect("service task panicked")
            .expect("service failed");
    }
}
