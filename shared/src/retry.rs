//! Retry policy as data: a pure function from attempt to delay — exponential, full jitter,
//! capped. Used for failed publishes now and for job retries.

use std::time::Duration;

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
}
