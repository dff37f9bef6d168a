//! Awaiting a condition with a deadline: tests never sleep for a fixed time and hope.

use std::future::Future;
use std::time::Duration;

/// Polls `probe` until it returns `Some`, panicking with `what` after `deadline`.
pub async fn eventually<T, F, Fut>(deadline: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = tokio::time::Instant::now();
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        if started.elapsed() > deadline {
            panic!("timed out after {deadline:?} waiting until {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
