//! Awaiting a condition with a deadline: tests never sleep for a fixed time and hope.

use std::future::Future;
use std::time::Duration;

/// Polls `probe` until it returns `Some`, panicking with `what` after `deadline`.
pub async fn eventually<T, F, Fut>(deadline: Duration, what: &str, probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    match within(deadline, probe).await {
        Some(value) => value,
        None => panic!("timed out after {deadline:?} waiting until {what}"),
    }
}

/// Polls `probe` until it returns `Some`, or `None` after `deadline`: for a caller that
/// does something else than fail when the condition never came.
pub async fn within<T, F, Fut>(deadline: Duration, mut probe: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = tokio::time::Instant::now();
    loop {
        if let Some(value) = probe().await {
            return Some(value);
        }
        if started.elapsed() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
