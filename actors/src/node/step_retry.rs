//! When the node actor may try its next step: failing steps in a row make each retry wait
//! longer (with jitter, never a tight loop), and a resumed maintenance may be told to wait
//! before its first step (start-ups of many are spread out). Only this file changes it.

use std::time::Duration;

use tokio::time::Instant;

use super::messages::{NodeMsg, Wake};
use crate::retry::Backoff;
use crate::timers::Timers;

/// The backoff of failing steps, and the hold it puts on retry ticks.
#[derive(Debug, Default)]
pub(super) struct StepRetry {
    /// Failing steps in a row.
    backoff: Backoff,
    /// Retry ticks start nothing before this (a failed step's backoff, or a paced start-up).
    hold_until: Option<Instant>,
}

impl StepRetry {
    /// Nothing starts for `start_after` (zero: no wait).
    pub(super) fn start_after(start_after: Duration) -> Self {
        StepRetry {
            backoff: Backoff::default(),
            hold_until: (!start_after.is_zero()).then(|| Instant::now() + start_after),
        }
    }

    /// At start-up: if the start waits its turn, its end is a [`Wake::RetryDue`] (true);
    /// false when the first step may go now.
    pub(super) fn wait_for_start(&self, timers: &mut Timers<NodeMsg>) -> bool {
        let Some(at) = self.hold_until else {
            return false;
        };
        timers.set(Wake::RetryDue, at.saturating_duration_since(Instant::now()));
        true
    }

    /// A step failed: the next retry waits out a backoff that grows with each failure in a
    /// row (between `base` and `max`, with jitter), ended by a [`Wake::RetryDue`].
    pub(super) fn failed(&mut self, timers: &mut Timers<NodeMsg>, base: Duration, max: Duration) {
        let delay = self.backoff.failed(base, max);
        self.hold_until = Some(Instant::now() + delay);
        timers.set(Wake::RetryDue, delay);
    }

    /// A step went through: the next failure starts from the shortest backoff again.
    pub(super) fn succeeded(&mut self) {
        self.backoff.succeeded();
    }

    /// The hold is over (its [`Wake::RetryDue`] came).
    pub(super) fn hold_over(&mut self) {
        self.hold_until = None;
    }

    /// No more waiting (a deletion does not wait for a paced start-up or a backoff): the hold
    /// and its timer go.
    pub(super) fn lift(&mut self, timers: &mut Timers<NodeMsg>) {
        self.hold_until = None;
        timers.cancel(&Wake::RetryDue);
    }

    /// Whether retry ticks must wait (a backoff or a paced start-up is running).
    pub(super) fn held(&self) -> bool {
        self.hold_until.is_some_and(|until| Instant::now() < until)
    }
}
