//! How long to wait after a refusal: exponential backoff with jitter, and the global pause that
//! API throttling (a 429 naming no PDB) puts on every eviction.
//!
//! The pause grows with each throttling that follows another and shrinks again only slowly, one
//! step per window of calls that get through (see `concurrency`): it used to start from the
//! shortest step again at the first success, and a level that throttled nmo once throttled it
//! again a second later.

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

/// The global pause after API throttling: the longer of the server's Retry-After and the
/// backoff, with jitter on both: between all and one and a half of Retry-After (never shorter
/// than the server asked), between half and all of the backoff.
pub(crate) fn throttle_pause(
    base: Duration,
    max: Duration,
    failures: u32,
    retry_after: Option<Duration>,
) -> Duration {
    let jitter: f64 = rand::rng().random_range(0.5..=1.0);
    throttle_pause_with_jitter(base, max, failures, retry_after, jitter)
}

/// [`throttle_pause`] with the jitter factor (0.5..=1.0) given.
pub(super) fn throttle_pause_with_jitter(
    base: Duration,
    max: Duration,
    failures: u32,
    retry_after: Option<Duration>,
    jitter: f64,
) -> Duration {
    let delay = backoff_with_jitter(base, max, failures, None, jitter);
    // Every client the server refused got the same Retry-After: spread them after it.
    retry_after.map_or(delay, |ra| delay.max(ra.mul_f64(2.0 - jitter)))
}

/// The global pause after API throttling: every eviction waits until it is over.
#[derive(Debug, Default)]
pub(super) struct Throttle {
    until: Option<Instant>,
    /// Steps of the backoff: one more for each pause that follows another.
    failures: u32,
    /// Calls that got through since the last pause or step down.
    passes: usize,
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
        self.passes = 0;
        let delay = backoff(self.failures);
        self.until = Some(now + delay);
        Some(delay)
    }

    /// A call got through: after `window` of them (the calls that may be out at once), the
    /// next throttling starts one step lower. Not at once: one call through a level that is
    /// still full says little, and starting from the shortest pause again came back into it.
    pub(super) fn passed(&mut self, window: usize) {
        if self.failures == 0 {
            return;
        }
        self.passes += 1;
        if self.passes >= window.max(1) {
            self.failures -= 1;
            self.passes = 0;
        }
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
    fn a_throttle_pause_honours_retry_after_with_jitter_above_it() {
        let (base, max) = (Duration::from_secs(1), Duration::from_secs(60));
        let ra = Some(Duration::from_secs(2));
        assert_eq!(
            throttle_pause_with_jitter(base, max, 1, ra, 1.0),
            Duration::from_secs(2)
        );
        assert_eq!(
            throttle_pause_with_jitter(base, max, 1, ra, 0.5),
            Duration::from_secs(3)
        );
        // A longer backoff wins over the server's wait.
        assert_eq!(
            throttle_pause_with_jitter(base, max, 4, ra, 1.0),
            Duration::from_secs(8)
        );
        assert_eq!(
            throttle_pause_with_jitter(base, max, 2, None, 0.5),
            Duration::from_secs(1)
        );
        for _ in 0..50 {
            let pause = throttle_pause(base, max, 1, ra);
            assert!(pause >= Duration::from_secs(2) && pause <= Duration::from_secs(3));
        }
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
        // The first success after a throttle does not bring the pause back to its shortest.
        throttle.passed(3);
        let end = after + Duration::from_secs(2);
        assert_eq!(
            throttle.throttled(end, seconds),
            Some(Duration::from_secs(3))
        );
        // A full window of successes brings it down one step, two windows two.
        for _ in 0..6 {
            throttle.passed(3);
        }
        let end = end + Duration::from_secs(3);
        assert_eq!(
            throttle.throttled(end, seconds),
            Some(Duration::from_secs(2))
        );
        for _ in 0..100 {
            throttle.passed(3);
        }
        let end = end + Duration::from_secs(2);
        assert_eq!(
            throttle.throttled(end, seconds),
            Some(Duration::from_secs(1)),
            "never below the first step"
        );
    }
}
