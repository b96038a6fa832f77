//! How long to wait after a refusal: exponential backoff with jitter, and the global pause that
//! API throttling (a 429 naming no PDB) puts on every eviction.

use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

/// Exponential backoff with "equal jitter": between half and all of `base * 2^(failures-1)`,
/// capped at `max`, and never shorter than the server's Retry-After.
pub(crate) fn backoff(
    base: Duration,
    max: Duration,
    failures: u32,
    retry_after: Option<Duration>,
) -> Duration {
    let jitter: f64 = rand::rng().random_range(0.5..=1.0);
    backoff_with_jitter(base, max, failures, retry_after, jitter)
}

/// [`backoff`] with the jitter factor (0.5..=1.0) given.
pub(super) fn backoff_with_jitter(
    base: Duration,
    max: Duration,
    failures: u32,
    retry_after: Option<Duration>,
    jitter: f64,
) -> Duration {
    let exp = failures.saturating_sub(1).min(20);
    let full = base.saturating_mul(1u32 << exp).min(max);
    let delay = full.mul_f64(jitter);
    retry_after.map_or(delay, |ra| delay.max(ra))
}

/// The global pause after API throttling: every eviction waits until it is over.
#[derive(Debug, Default)]
pub(super) struct Throttle {
    until: Option<Instant>,
    failures: u32,
}

impl Throttle {
    /// None when calls may go; else how long they must still wait.
    pub(super) fn wait(&mut self, now: Instant) -> Option<Duration> {
        match self.until {
            Some(until) if until > now => Some(until - now),
            Some(_) => {
                self.until = None;
                None
            }
            None => None,
        }
    }

    /// A call was throttled. Pauses for a longer backoff, unless a pause is already running
    /// (calls in flight when it began are refused too: the server throttled once, not once per
    /// call); returns the new pause.
    pub(super) fn throttled(
        &mut self,
        now: Instant,
        backoff: impl FnOnce(u32) -> Duration,
    ) -> Option<Duration> {
        if self.until.is_some_and(|until| until > now) {
            return None;
        }
        self.failures = self.failures.saturating_add(1);
        let delay = backoff(self.failures);
        self.until = Some(now + delay);
        Some(delay)
    }

    /// A call got through: the next throttling starts from the shortest backoff again.
    pub(super) fn passed(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_capped_and_honours_retry_after() {
        let (base, max) = (Duration::from_secs(1), Duration::from_secs(60));
        for _ in 0..50 {
            let first = backoff(base, max, 1, None);
            assert!(first >= Duration::from_millis(500) && first <= base);
            let fourth = backoff(base, max, 4, None);
            assert!(fourth >= Duration::from_secs(4) && fourth <= Duration::from_secs(8));
            let capped = backoff(base, max, 30, None);
            assert!(capped >= Duration::from_secs(30) && capped <= max);
            let ra = backoff(base, max, 1, Some(Duration::from_secs(10)));
            assert_eq!(ra, Duration::from_secs(10));
        }
    }

    #[test]
    fn jitter_scales_the_full_backoff() {
        let (base, max) = (Duration::from_secs(1), Duration::from_secs(60));
        assert_eq!(
            backoff_with_jitter(base, max, 3, None, 0.5),
            Duration::from_secs(2)
        );
        assert_eq!(
            backoff_with_jitter(base, max, 3, None, 1.0),
            Duration::from_secs(4)
        );
    }

    #[test]
    fn throttling_pauses_once_and_grows_until_a_call_passes() {
        let start = Instant::now();
        let mut throttle = Throttle::default();
        let seconds = |failures: u32| Duration::from_secs(u64::from(failures));
        assert_eq!(throttle.wait(start), None);
        assert_eq!(
            throttle.throttled(start, seconds),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            throttle.throttled(start, seconds),
            None,
            "already paused: not lengthened"
        );
        let later = start + Duration::from_millis(400);
        assert_eq!(throttle.wait(later), Some(Duration::from_millis(600)));
        let after = start + Duration::from_secs(1);
        assert_eq!(throttle.wait(after), None);
        assert_eq!(
            throttle.throttled(after, seconds),
            Some(Duration::from_secs(2))
        );
        throttle.passed();
        let end = after + Duration::from_secs(2);
        assert_eq!(
            throttle.throttled(end, seconds),
            Some(Duration::from_secs(1))
        );
    }
}
