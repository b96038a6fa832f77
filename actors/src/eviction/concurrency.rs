//! How many eviction calls may be out at once: the configured cap
//! (`--max-evictions-in-flight`) while the API server keeps up, less after it throttles.
//!
//! A 429 of API Priority and Fairness says nmo's priority level has no seat and no queue place
//! left for it. Pausing alone does not help: after the pause nmo sent as many calls as before
//! into the same few seats, and on a real API server whose level had ~3 seats and a queue of 2,
//! 415 of 517 eviction calls came back 429. So the cap adapts as TCP's window does (additive
//! increase, multiplicative decrease): each throttling pause halves it, down to one call, and it
//! grows back by one call for each full window of calls that get through (as many successes as
//! the cap is), up to the configured cap. A level that refused at 16 calls is then tried at 8,
//! and only slowly at more; a server that never throttles never sees the cap below the
//! configured one.

/// The eviction calls that may be out at once.
#[derive(Debug)]
pub(super) struct Concurrency {
    /// The configured cap.
    max: usize,
    /// The cap now.
    limit: usize,
    /// Calls that got through since the cap last changed.
    passes: usize,
}

impl Concurrency {
    /// At most `max` calls out at once (at least one).
    pub(super) fn new(max: usize) -> Self {
        let max = max.max(1);
        Concurrency {
            max,
            limit: max,
            passes: 0,
        }
    }

    /// The calls that may be out now.
    pub(super) fn limit(&self) -> usize {
        self.limit
    }

    /// The API server throttled and a new pause began: half as many calls from now on. Once
    /// per pause, not once per refused call: the calls in flight when the pause began were
    /// refused by the same throttling.
    pub(super) fn throttled(&mut self) {
        self.limit = (self.limit / 2).max(1);
        self.passes = 0;
    }

    /// A call got through: after a full window of them, one more call may be out at once.
    pub(super) fn passed(&mut self) {
        if self.limit >= self.max {
            return;
        }
        self.passes += 1;
        if self.passes >= self.limit {
            self.limit += 1;
            self.passes = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_throttle_halves_the_cap_down_to_one() {
        let mut concurrency = Concurrency::new(32);
        assert_eq!(concurrency.limit(), 32);
        let mut limits = Vec::new();
        for _ in 0..7 {
            concurrency.throttled();
            limits.push(concurrency.limit());
        }
        assert_eq!(limits, [16, 8, 4, 2, 1, 1, 1]);
    }

    #[test]
    fn the_cap_grows_back_one_call_per_window_and_never_past_the_configured_one() {
        let mut concurrency = Concurrency::new(8);
        concurrency.throttled();
        assert_eq!(concurrency.limit(), 4);
        // A window of 4 successes: 5; the first success after a throttle changes nothing.
        concurrency.passed();
        assert_eq!(concurrency.limit(), 4);
        for _ in 0..3 {
            concurrency.passed();
        }
        assert_eq!(concurrency.limit(), 5);
        // 5 more: 6, then 6 more: 7, 7 more: 8, and there it stays.
        for (window, limit) in [(5, 6), (6, 7), (7, 8)] {
            for _ in 0..window - 1 {
                concurrency.passed();
            }
            assert_eq!(concurrency.limit(), limit - 1, "before the window's last");
            concurrency.passed();
            assert_eq!(concurrency.limit(), limit);
        }
        for _ in 0..100 {
            concurrency.passed();
        }
        assert_eq!(concurrency.limit(), 8);
    }

    #[test]
    fn a_cap_of_zero_is_one() {
        let mut concurrency = Concurrency::new(0);
        assert_eq!(concurrency.limit(), 1);
        concurrency.throttled();
        concurrency.passed();
        assert_eq!(concurrency.limit(), 1);
    }
}
