//! Retry policy as data: a pure function from attempt to delay — exponential, full jitter,
//! capped — for failed publishes and job retries; and the one backoff every loop uses to
//! reach a server that stopped answering.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Backoff {
    pub fn new(base: Duration, max: Duration) -> Self {
        Self { base, max }
    }

    /// The ceiling for `attempt` (1-based): `base * 2^(attempt-1)`, never above `max`.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(32);
        self.base
            .checked_mul(1u32 << exponent.min(31))
            .map_or(self.max, |delay| delay.min(self.max))
    }

    /// Full jitter: `unit` in `[0, 1)` picks a delay in `[0, ceiling]`. Pure, so tests
    /// pick `unit`.
    pub fn delay_with(&self, attempt: u32, unit: f64) -> Duration {
        self.ceiling(attempt).mul_f64(unit.clamp(0.0, 1.0))
    }

    /// A random delay for `attempt`.
    pub fn delay(&self, attempt: u32) -> Duration {
        self.delay_with(attempt, rand::random::<f64>())
    }
}

/// The pauses of a loop that lost its server (Redis, PostgreSQL): from 100 ms doubling
/// to 5 s, jittered so that a fleet does not reconnect in step, never giving up. The
/// dispatcher's publisher and LISTEN connection and the worker's fetcher all use it.
pub struct ReconnectBackoff {
    /// `None` while the server answers.
    delays: Option<backon::ExponentialBackoff>,
}

impl ReconnectBackoff {
    pub const MIN: Duration = Duration::from_millis(100);
    pub const MAX: Duration = Duration::from_secs(5);

    pub fn new() -> Self {
        Self { delays: None }
    }

    /// The pause before the next attempt; each consecutive failure waits longer.
    pub fn next_delay(&mut self) -> Duration {
        self.delays
            .get_or_insert_with(|| {
                ExponentialBuilder::default()
                    .with_min_delay(Self::MIN)
                    .with_max_delay(Self::MAX)
                    .with_jitter()
                    .without_max_times()
                    .build()
            })
            .next()
            .unwrap_or(Self::MAX)
    }

    /// The server answered: the next failure starts from the shortest pause again.
    /// True when it had been failing (worth a log line).
    pub fn reset(&mut self) -> bool {
        self.delays.take().is_some()
    }
}

impl Default for ReconnectBackoff {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Backoff {
        Backoff::new(Duration::from_millis(100), Duration::from_secs(10))
    }

    #[test]
    fn ceiling_doubles_per_attempt_until_the_cap() {
        let policy = policy();
        assert_eq!(policy.ceiling(1), Duration::from_millis(100));
        assert_eq!(policy.ceiling(2), Duration::from_millis(200));
        assert_eq!(policy.ceiling(5), Duration::from_millis(1600));
        assert_eq!(policy.ceiling(8), Duration::from_secs(10));
        assert_eq!(policy.ceiling(u32::MAX), Duration::from_secs(10));
    }

    #[test]
    fn jitter_stays_between_zero_and_the_ceiling() {
        let policy = policy();
        assert_eq!(policy.delay_with(3, 0.0), Duration::ZERO);
        assert_eq!(policy.delay_with(3, 1.0), Duration::from_millis(400));
        assert_eq!(policy.delay_with(3, 0.5), Duration::from_millis(200));
        for attempt in 1..100 {
            assert!(policy.delay(attempt) <= policy.max);
        }
    }

    #[test]
    fn reconnect_pauses_grow_to_the_cap_and_start_over_after_a_reset() {
        let mut backoff = ReconnectBackoff::new();
        assert!(!backoff.reset(), "a fresh backoff was not failing");
        let first = backoff.next_delay();
        assert!(first <= ReconnectBackoff::MIN * 2, "{first:?}");
        let mut last = first;
        for _ in 0..20 {
            last = backoff.next_delay();
            assert!(last <= ReconnectBackoff::MAX * 2, "{last:?}");
        }
        assert!(last >= ReconnectBackoff::MAX, "{last:?}");
        assert!(backoff.reset(), "it was failing");
        assert!(backoff.next_delay() <= ReconnectBackoff::MIN * 2);
    }
}
