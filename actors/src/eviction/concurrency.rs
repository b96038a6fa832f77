//! How many eviction calls may be out at once: the configured cap
//! (`--max-evictions-in-flight`) while the API server keeps up, less after it throttles.
//!
//! A 429 of API Priority and Fairness says nmo's priority level has no seat and no queue place
//! left for it. Pausing alone does not help: after the pause nmo sent as many calls as before,
//! all at once, into the same few seats, and on a real API server whose level had ~3 seats and a
//! queue of 2, 415 of 517 eviction calls came back 429. So the cap adapts as TCP's congestion
//! window does:
//! - each throttling pause halves the cap the window climbs back to (down to one call) and
//!   restarts the window at one call: calls sent all at once after a pause are what a small
//!   level refuses, where the same calls sent one per answer mostly get a seat;
//! - below that cap each call that gets through lets one more out (the window doubles each round
//!   of answers); at it, one more call per full window of calls that get through, and at least
//!   [`GROWTH_PASSES`] of them, up to the configured cap: each step past what the level holds
//!   costs a 429, and at one step per window a small level (3 seats) refused about one eviction
//!   in ten that way;
//! - the first calls start from a window of [`INITIAL_WINDOW`] the same way, so that the first
//!   wave of a maintenance does not land on a small level as a burst of 32. Against a server
//!   that keeps up this costs a few round trips of a few milliseconds each.
//!
//! A server that never throttles thus has the configured cap after the first answers.

/// The calls that may be out at once before any has been answered.
pub(super) const INITIAL_WINDOW: usize = 4;
/// The fewest calls that get through, above the ceiling, before the window grows by one.
pub(super) const GROWTH_PASSES: usize = 16;

/// The eviction calls that may be out at once.
#[derive(Debug)]
pub(super) struct Concurrency {
    /// The configured cap.
    max: usize,
    /// What the window climbs back to one call per success (TCP's slow-start threshold).
    ceiling: usize,
    /// The calls that may be out now.
    window: usize,
    /// Calls that got through since the window last grew at or above the ceiling.
    passes: usize,
}

impl Concurrency {
    /// At most `max` calls out at once (at least one).
    pub(super) fn new(max: usize) -> Self {
        let max = max.max(1);
        Concurrency {
            max,
            ceiling: max,
            window: INITIAL_WINDOW.min(max),
            passes: 0,
        }
    }

    /// The calls that may be out now.
    pub(super) fn limit(&self) -> usize {
        self.window
    }

    /// What the window climbs back to quickly after a pause: a window of successes there is
    /// what makes the throttling pause one step shorter.
    pub(super) fn ceiling(&self) -> usize {
        self.ceiling
    }

    /// The API server throttled and a new pause began: half the window is the new ceiling, and
    /// the calls after the pause start from one. Once per pause, not once per refused call: the
    /// calls in flight when the pause began were refused by the same throttling.
    pub(super) fn throttled(&mut self) {
        self.ceiling = (self.window / 2).max(1);
        self.window = 1;
        self.passes = 0;
    }

    /// A call got through: one more call out at once below the ceiling; at it, one more after
    /// a full window of them, and at least [`GROWTH_PASSES`].
    pub(super) fn passed(&mut self) {
        if self.window < self.ceiling {
            self.window += 1;
            return;
        }
        if self.window >= self.max {
            return;
        }
        self.passes += 1;
        if self.passes >= self.window.max(GROWTH_PASSES) {
            self.window += 1;
            self.ceiling = self.window;
            self.passes = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Grows `concurrency` by `successes` calls that get through.
    fn pass(concurrency: &mut Concurrency, successes: usize) {
        for _ in 0..successes {
            concurrency.passed();
        }
    }

    #[test]
    fn the_first_calls_start_small_and_reach_the_cap_at_once_after_the_first_answers() {
        let mut concurrency = Concurrency::new(32);
        assert_eq!(concurrency.limit(), INITIAL_WINDOW);
        pass(&mut concurrency, 28);
        assert_eq!(concurrency.limit(), 32);
        pass(&mut concurrency, 1000);
        assert_eq!(concurrency.limit(), 32, "never past the configured cap");
        assert_eq!(Concurrency::new(2).limit(), 2);
    }

    #[test]
    fn a_throttle_halves_the_ceiling_down_to_one_and_restarts_from_one_call() {
        let mut concurrency = Concurrency::new(32);
        pass(&mut concurrency, 28);
        let mut ceilings = Vec::new();
        for _ in 0..6 {
            concurrency.throttled();
            assert_eq!(concurrency.limit(), 1);
            ceilings.push(concurrency.ceiling());
            // Back up to the ceiling, one call per success.
            let ceiling = concurrency.ceiling();
            pass(&mut concurrency, ceiling - 1);
            assert_eq!(concurrency.limit(), concurrency.ceiling());
        }
        assert_eq!(ceilings, [16, 8, 4, 2, 1, 1]);
    }

    #[test]
    fn above_the_ceiling_the_window_grows_one_call_per_window_up_to_the_cap() {
        let mut concurrency = Concurrency::new(40);
        pass(&mut concurrency, 36);
        assert_eq!(concurrency.limit(), 40);
        concurrency.throttled();
        pass(&mut concurrency, 19);
        assert_eq!((concurrency.limit(), concurrency.ceiling()), (20, 20));
        // A window of 20 successes: 21; 21 more: 22, and so on up to 40, where it stays.
        let steps: Vec<_> = (20..40).map(|window| (window, window + 1)).collect();
        for (window, limit) in steps {
            pass(&mut concurrency, window - 1);
            assert_eq!(concurrency.limit(), limit - 1, "before the window's last");
            concurrency.passed();
            assert_eq!(concurrency.limit(), limit);
        }
        pass(&mut concurrency, 1000);
        assert_eq!(concurrency.limit(), 40);
    }

    #[test]
    fn a_small_window_grows_only_after_growth_passes_successes() {
        let mut concurrency = Concurrency::new(32);
        pass(&mut concurrency, 28);
        // Throttled at 32, then at each ceiling again: 16, 8, 4, 2.
        for ceiling in [16, 8, 4] {
            concurrency.throttled();
            pass(&mut concurrency, ceiling - 1);
            assert_eq!(concurrency.limit(), ceiling);
        }
        concurrency.throttled();
        assert_eq!(concurrency.ceiling(), 2);
        pass(&mut concurrency, 1);
        assert_eq!(concurrency.limit(), 2);
        pass(&mut concurrency, GROWTH_PASSES - 1);
        assert_eq!(concurrency.limit(), 2);
        pass(&mut concurrency, 1);
        assert_eq!(concurrency.limit(), 3);
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
