//! The cluster-wide rate limit of evictions: a token bucket (pure; time is passed in).

use std::time::Duration;

use tokio::time::Instant;

/// Refills at `rate` tokens per second up to `burst`; one eviction call costs one token.
#[derive(Debug, Clone)]
pub(super) struct TokenBucket {
    rate_per_sec: f64,
    burst: f64,
    tokens: f64,
    refilled_at: Instant,
}

impl TokenBucket {
    /// A full bucket (a burst at start is allowed). A burst below one counts as one.
    pub(super) fn new(rate_per_sec: f64, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            rate_per_sec,
            burst,
            tokens: burst,
            refilled_at: now,
        }
    }

    /// Adds what the time since the last refill earned, up to the burst.
    pub(super) fn refill(&mut self, now: Instant) {
        let elapsed = now.duration_since(self.refilled_at).as_secs_f64();
        self.refilled_at = now;
        self.tokens = (self.tokens + elapsed * self.rate_per_sec).min(self.burst);
    }

    /// None when a token is there; else how long until one is (at the last refill's level).
    pub(super) fn wait(&self) -> Option<Duration> {
        self.wait_for(1.0)
    }

    /// None when `n` tokens are there (`n` is capped at the burst, which the bucket never
    /// exceeds, and is at least one); else how long until they are.
    pub(super) fn wait_for(&self, n: f64) -> Option<Duration> {
        let n = n.min(self.burst).max(1.0);
        if self.tokens >= n {
            return None;
        }
        // A rate of zero would never refill: look again every 1000 s rather than never.
        let rate = self.rate_per_sec.max(0.001);
        Some(Duration::from_secs_f64((n - self.tokens) / rate))
    }

    /// How many tokens the bucket earns in `period` (at least one).
    pub(super) fn earned_in(&self, period: Duration) -> f64 {
        (self.rate_per_sec * period.as_secs_f64()).max(1.0)
    }

    /// Spends one token (the caller checked [`TokenBucket::wait`]).
    pub(super) fn take(&mut self) {
        self.tokens -= 1.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_full_then_waits_for_the_refill() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(2.0, 3, start);
        for _ in 0..3 {
            assert_eq!(bucket.wait(), None);
            bucket.take();
        }
        assert_eq!(bucket.wait(), Some(Duration::from_millis(500)));
        bucket.refill(start + Duration::from_millis(250));
        assert_eq!(bucket.wait(), Some(Duration::from_millis(250)));
        bucket.refill(start + Duration::from_millis(500));
        assert_eq!(bucket.wait(), None);
    }

    #[test]
    fn never_holds_more_than_the_burst() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(100.0, 2, start);
        bucket.refill(start + Duration::from_secs(60));
        bucket.take();
        bucket.take();
        assert!(bucket.wait().is_some(), "only the burst was banked");
    }

    #[test]
    fn a_zero_burst_still_lets_one_through() {
        let mut bucket = TokenBucket::new(1.0, 0, Instant::now());
        assert_eq!(bucket.wait(), None);
        bucket.take();
        assert_eq!(bucket.wait(), Some(Duration::from_secs(1)));
    }
}
