//! Retrying without storms: exponential backoff with jitter for failing steps and crashed
//! actors, and a pacer that spreads the start-up of many maintenances resumed at once (after a
//! restart or a leader handover, every maintenance would otherwise make its start-up requests
//! in the same instant).

use std::time::Duration;

use tokio::time::Instant;

use crate::eviction::backoff::backoff;

/// Consecutive failures of one thing, and how long to wait before the next attempt (also the
/// operator's watches' retries).
#[derive(Debug, Clone, Copy, Default)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    /// One more failure: the wait before trying again, between half and all of
    /// `base * 2^(failures-1)`, capped at `max`.
    pub fn failed(&mut self, base: Duration, max: Duration) -> Duration {
        self.failures = self.failures.saturating_add(1);
        backoff(base, max, self.failures, None)
    }

    /// Failures in a row so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// It worked: the next failure starts from `base` again.
    pub fn succeeded(&mut self) {
        self.failures = 0;
    }
}

/// Spreads starts over time: `burst` may start at once, then `rate` per second (the generic
/// cell rate algorithm: a start is due at the theoretical arrival time minus the burst's
/// tolerance).
#[derive(Debug)]
pub(crate) struct Pacer {
    interval: Duration,
    tolerance: Duration,
    next: Option<Instant>,
}

impl Pacer {
    /// `rate` starts per second after a burst of `burst`.
    pub(crate) fn new(rate: f64, burst: u32) -> Self {
        let interval = if rate.is_finite() && rate > 0.0 {
            Duration::from_secs_f64(1.0 / rate)
        } else {
            Duration::ZERO
        };
        Pacer {
            interval,
            tolerance: interval.saturating_mul(burst.saturating_sub(1)),
            next: None,
        }
    }

    /// How long the next start waits, from `now`.
    pub(crate) fn delay(&mut self, now: Instant) -> Duration {
        let theoretical = self.next.map_or(now, |next| next.max(now));
        let due = theoretical
            .checked_sub(self.tolerance)
            .map_or(now, |at| at.max(now));
        self.next = Some(theoretical + self.interval);
        due - now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_failures_and_resets() {
        let (base, max) = (Duration::from_secs(5), Duration::from_secs(60));
        let mut backoff = Backoff::default();
        let first = backoff.failed(base, max);
        assert!(
            (Duration::from_millis(2500)..=base).contains(&first),
            "{first:?}"
        );
        for _ in 0..10 {
            backoff.failed(base, max);
        }
        let late = backoff.failed(base, max);
        assert!((Duration::from_secs(30)..=max).contains(&late), "{late:?}");
        backoff.succeeded();
        assert!(backoff.failed(base, max) <= base);
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_starts_at_once_and_the_rest_at_the_rate() {
        let mut pacer = Pacer::new(10.0, 5);
        let now = Instant::now();
        let delays: Vec<Duration> = (0..8).map(|_| pacer.delay(now)).collect();
        assert!(delays[..5].iter().all(Duration::is_zero), "{delays:?}");
        assert_eq!(delays[5], Duration::from_millis(100));
        assert_eq!(delays[7], Duration::from_millis(300));
        // After a quiet second the burst is available again.
        let later = now + Duration::from_secs(2);
        assert_eq!(pacer.delay(later), Duration::ZERO);
    }
}
