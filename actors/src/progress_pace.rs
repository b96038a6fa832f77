//! One pace for the progress writes of every drain running at once.
//!
//! A drain writes its progress (the percentage, the pods left) at most once per
//! `progress_coalesce` (30 s). That is a write every 30 s per drain, so the writes of a cluster
//! grow with the drains running together: a thousand drains of five minutes would write their
//! progress 33 times a second, about as much as they evict, for a figure nobody reads that
//! often. So the drains share a pace: together they write their progress at most
//! [`PROGRESS_WRITES_PER_SEC`] times a second, each waiting `drains / rate` between two writes
//! when that is longer than `progress_coalesce` (100 s with 1,000 drains). News (an error, a
//! blocked pod, a condition) and phase changes are not paced: they are written as before.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Progress writes per second that all the drains running at once share.
pub const PROGRESS_WRITES_PER_SEC: f64 = 10.0;

/// How many drains are writing progress, shared by every node actor of a process.
#[derive(Debug, Clone, Default)]
pub struct ProgressPace {
    drains: Arc<AtomicUsize>,
}

impl ProgressPace {
    /// A place for one node actor, not yet counted.
    pub fn slot(&self) -> PaceSlot {
        PaceSlot {
            pace: self.clone(),
            counted: false,
        }
    }

    /// Drains counted now.
    pub fn drains(&self) -> usize {
        self.drains.load(Ordering::Relaxed)
    }

    /// The least wait between two progress writes of one drain while `drains` run, given
    /// the wait `least` one drain alone keeps.
    fn window(least: Duration, drains: usize) -> Duration {
        least.max(Duration::from_secs_f64(
            drains as f64 / PROGRESS_WRITES_PER_SEC,
        ))
    }
}

/// One node actor's place in the pace: counted while its drain writes progress, given back
/// when the drain ends or the actor stops.
#[derive(Debug)]
pub struct PaceSlot {
    pace: ProgressPace,
    counted: bool,
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

    /// The least wait between two of this drain's progress writes, `least` alone.
    pub fn window(&self, least: Duration) -> Duration {
        ProgressPace::window(least, self.pace.drains())
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

    #[test]
    fn few_drains_keep_the_window_of_one_and_many_share_the_rate() {
        assert_eq!(ProgressPace::window(LEAST, 0), LEAST);
        assert_eq!(ProgressPace::window(LEAST, 300), LEAST);
        assert_eq!(ProgressPace::window(LEAST, 500), Duration::from_secs(50));
        assert_eq!(ProgressPace::window(LEAST, 1000), Duration::from_secs(100));
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
        assert_eq!(slots[0].window(LEAST), Duration::from_secs(60));
        slots[0].draining(false);
        assert_eq!(pace.drains(), 599);
        slots.truncate(100);
        assert_eq!(pace.drains(), 99);
        assert_eq!(slots[1].window(LEAST), LEAST);
        drop(slots);
        assert_eq!(pace.drains(), 0);
    }
}
