//! One pace for the progress writes of every drain running at once.
//!
//! A drain writes its progress (the percentage, the pods left) at most once per
//! `progress_coalesce` (30 s). That is a write every 30 s per drain, so the writes of a cluster
//! grow with the drains running together: a thousand drains of five minutes would write their
//! progress 33 times a second, about as much as they evict, for a figure nobody reads that
//! often. So the drains share a pace: together they write their progress at most a tenth as
//! often as the cluster-wide eviction rate allows evictions, and never more than
//! [`PROGRESS_WRITES_PER_SEC`] times a second, each waiting `drains / rate` between two writes
//! when that is longer than `progress_coalesce`. The eviction rate is what the admin says the
//! cluster takes in writes for maintenance; progress is the least useful of them. With the
//! defaults (50 evictions a second) that is 5 progress writes a second: with 1,000 drains each
//! writes its progress every 200 s, and never less often than once an hour
//! ([`LONGEST_WINDOW`]). News (an error, a blocked pod, a condition) and phase
//! changes are not paced: they are written as before.
//!
//! The window spaces each drain's writes, not the drains' writes together: drains that wrote
//! in the same second (they began together) see their windows end in the same second, and
//! would all write then. So a drain whose window has ended also takes a turn of the shared
//! pace ([`PaceSlot::turn`]), turns `1 / rate` apart: at 1,000 drains on a real API server,
//! 560 progress writes came in 20 s (28 a second against a pace of 5) before turns were
//! taken, and the evictions slowed by half while they did.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Progress writes per second that all the drains running at once share, at most.
pub const PROGRESS_WRITES_PER_SEC: f64 = 10.0;

/// The longest wait between two progress writes of one drain, however low the eviction rate
/// and however many drains: the status says how a drain goes at least this often.
pub const LONGEST_WINDOW: Duration = Duration::from_secs(3600);

/// Evictions the cluster-wide rate allows for each progress write the drains share.
pub const EVICTIONS_PER_PROGRESS_WRITE: f64 = 10.0;

/// Progress writes per second that the drains share under an eviction rate of
/// `evictions_per_sec`.
fn shared_rate(evictions_per_sec: f64) -> f64 {
    (evictions_per_sec / EVICTIONS_PER_PROGRESS_WRITE).min(PROGRESS_WRITES_PER_SEC)
}

/// The time between two turns of the shared pace under an eviction rate of
/// `evictions_per_sec`; none for a rate that is not a positive number (the options refuse
/// such a rate), at most [`LONGEST_WINDOW`].
fn turn_gap(evictions_per_sec: f64) -> Duration {
    if evictions_per_sec.is_nan() || evictions_per_sec <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(1.0 / shared_rate(evictions_per_sec))
        .unwrap_or(LONGEST_WINDOW)
        .min(LONGEST_WINDOW)
}

/// How many drains are writing progress, and when the next turn to write it is free; shared
/// by every node actor of a process.
#[derive(Debug, Clone, Default)]
pub struct ProgressPace {
    drains: Arc<AtomicUsize>,
    /// The earliest instant the next turn may be at (none taken yet: now).
    next_turn: Arc<Mutex<Option<Instant>>>,
}

impl ProgressPace {
    /// A place for one node actor, not yet counted.
    pub fn slot(&self) -> PaceSlot {
        PaceSlot {
            pace: self.clone(),
            counted: false,
            turn: None,
        }
    }

    /// Takes the next free turn from `now`: `now` itself if the last turn taken is at least a
    /// gap behind, else a gap after that turn.
    fn take_turn(&self, now: Instant, evictions_per_sec: f64) -> Instant {
        let mut next = self
            .next_turn
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let turn = next.map_or(now, |free| free.max(now));
        *next = Some(turn + turn_gap(evictions_per_sec));
        turn
    }

    /// Drains counted now.
    pub fn drains(&self) -> usize {
        self.drains.load(Ordering::Relaxed)
    }

    /// The least wait between two progress writes of one drain while `drains` run under an
    /// eviction rate of `evictions_per_sec`, given the wait `least` one drain alone keeps.
    fn window(least: Duration, drains: usize, evictions_per_sec: f64) -> Duration {
        if evictions_per_sec.is_nan() || evictions_per_sec <= 0.0 {
            // The options refuse such a rate; a drain alone's wait is the safe reading.
            return least;
        }
        let shared = Duration::try_from_secs_f64(drains as f64 / shared_rate(evictions_per_sec))
            .unwrap_or(LONGEST_WINDOW);
        least.max(shared.min(LONGEST_WINDOW))
    }
}

/// One node actor's place in the pace: counted while its drain writes progress, given back
/// when the drain ends or the actor stops.
#[derive(Debug)]
pub struct PaceSlot {
    pace: ProgressPace,
    counted: bool,
    /// The turn taken and not yet used.
    turn: Option<Instant>,
}

impl PaceSlot {
    /// Whether this actor's drain is running (and so writes progress).
    pub fn draining(&mut self, running: bool) {
        if running == self.counted {
            return;
        }
        self.counted = running;
        if running {
            self.pace.drains.fetch_add(1, Ordering::Relaxed);
        } else {
            self.pace.drains.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The least wait between two of this drain's progress writes, `least` alone, under an
    /// eviction rate of `evictions_per_sec`.
    pub fn window(&self, least: Duration, evictions_per_sec: f64) -> Duration {
        ProgressPace::window(least, self.pace.drains(), evictions_per_sec)
    }

    /// This drain's window has ended and its progress is due: how long it waits for its turn
    /// of the shared pace (none: write now). A turn is taken once and kept until it is used.
    pub fn turn(&mut self, now: Instant, evictions_per_sec: f64) -> Option<Duration> {
        let turn = *self
            .turn
            .get_or_insert_with(|| self.pace.take_turn(now, evictions_per_sec));
        if turn <= now {
            self.turn = None;
            None
        } else {
            Some(turn - now)
        }
    }

    /// A write went out that was not progress alone (a phase, news): it carried the progress
    /// too, so a turn held for it is let go.
    pub fn wrote(&mut self) {
        self.turn = None;
    }
}

impl Drop for PaceSlot {
    fn drop(&mut self) {
        self.draining(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEAST: Duration = Duration::from_secs(30);

    /// The default cluster-wide eviction rate.
    const EVICTIONS: f64 = 50.0;

    #[test]
    fn few_drains_keep_the_window_of_one_and_many_share_a_tenth_of_the_eviction_rate() {
        assert_eq!(ProgressPace::window(LEAST, 0, EVICTIONS), LEAST);
        assert_eq!(ProgressPace::window(LEAST, 150, EVICTIONS), LEAST);
        assert_eq!(
            ProgressPace::window(LEAST, 500, EVICTIONS),
            Duration::from_secs(100)
        );
        assert_eq!(
            ProgressPace::window(LEAST, 1000, EVICTIONS),
            Duration::from_secs(200)
        );
    }

    #[test]
    fn a_high_eviction_rate_shares_at_most_ten_writes_a_second() {
        assert_eq!(ProgressPace::window(LEAST, 300, 500.0), LEAST);
        assert_eq!(
            ProgressPace::window(LEAST, 1000, 500.0),
            Duration::from_secs(100)
        );
        assert_eq!(
            ProgressPace::window(LEAST, 1000, 10_000.0),
            Duration::from_secs(100)
        );
    }

    #[test]
    fn a_tiny_eviction_rate_waits_at_most_the_longest_window() {
        assert_eq!(ProgressPace::window(LEAST, 1, 1e-300), LONGEST_WINDOW);
        assert_eq!(ProgressPace::window(LEAST, 1000, 0.5), LONGEST_WINDOW);
    }

    #[test]
    fn a_rate_that_is_not_a_positive_number_keeps_the_window_of_one() {
        for rate in [0.0, -1.0, f64::NAN] {
            assert_eq!(ProgressPace::window(LEAST, 1000, rate), LEAST);
        }
    }

    #[test]
    fn drains_due_at_once_take_turns_a_shared_gap_apart() {
        let pace = ProgressPace::default();
        let now = Instant::now();
        let mut slots: Vec<PaceSlot> = (0..20).map(|_| pace.slot()).collect();
        // Under the default rate the drains share 5 writes a second: a turn every 200 ms.
        let waits: Vec<Option<Duration>> =
            slots.iter_mut().map(|s| s.turn(now, EVICTIONS)).collect();
        assert_eq!(waits[0], None, "the first writes now");
        for (i, wait) in (0u32..).zip(&waits).skip(1) {
            assert_eq!(*wait, Some(Duration::from_millis(200) * i));
        }
        // A turn taken is kept: asking again does not take another.
        let later = now + Duration::from_millis(100);
        assert_eq!(
            slots[1].turn(later, EVICTIONS),
            Some(Duration::from_millis(100))
        );
        let at_its_turn = now + Duration::from_millis(200);
        assert_eq!(slots[1].turn(at_its_turn, EVICTIONS), None, "its turn");
        // Used, it is gone: the next asks for a new one, after the 19 taken.
        assert_eq!(
            slots[1].turn(at_its_turn, EVICTIONS),
            Some(Duration::from_millis(200) * 19)
        );
    }

    #[test]
    fn a_turn_is_let_go_by_a_write_that_carried_the_progress() {
        let pace = ProgressPace::default();
        let now = Instant::now();
        let (mut first, mut second) = (pace.slot(), pace.slot());
        assert_eq!(first.turn(now, EVICTIONS), None);
        assert_eq!(
            second.turn(now, EVICTIONS),
            Some(Duration::from_millis(200))
        );
        // A phase change went out instead: the turn held is let go, the next progress takes
        // a new one.
        second.wrote();
        assert_eq!(
            second.turn(now, EVICTIONS),
            Some(Duration::from_millis(400))
        );
    }

    #[test]
    fn turns_are_not_spaced_under_a_rate_that_is_not_a_positive_number() {
        let pace = ProgressPace::default();
        let now = Instant::now();
        let mut slots: Vec<PaceSlot> = (0..3).map(|_| pace.slot()).collect();
        for slot in &mut slots {
            assert_eq!(slot.turn(now, f64::NAN), None);
        }
    }

    #[test]
    fn a_slot_counts_while_draining_once_and_is_given_back_when_dropped() {
        let pace = ProgressPace::default();
        let mut slots: Vec<PaceSlot> = (0..600).map(|_| pace.slot()).collect();
        assert_eq!(pace.drains(), 0);
        for slot in &mut slots {
            slot.draining(true);
            // Said twice, counted once.
            slot.draining(true);
        }
        assert_eq!(pace.drains(), 600);
        assert_eq!(slots[0].window(LEAST, EVICTIONS), Duration::from_secs(120));
        slots[0].draining(false);
        assert_eq!(pace.drains(), 599);
        slots.truncate(100);
        assert_eq!(pace.drains(), 99);
        assert_eq!(slots[1].window(LEAST, EVICTIONS), LEAST);
        drop(slots);
        assert_eq!(pace.drains(), 0);
    }
}
