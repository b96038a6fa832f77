//! Crashed node actors started again: each after a wait that grows with its crashes in a row
//! (its [`Wake::Respawn`] timer in the supervisor's table). Changed only here.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::messages::{SupervisorMsg, Wake};
use crate::model::Uid;
use crate::retry::Backoff;
use crate::timers::Timers;

/// A node actor that ran this long before crashing starts its next respawn from the shortest
/// wait again.
pub(super) const STABLE_RUN: Duration = Duration::from_secs(600);

/// The respawns due and the crashes in a row, by uid.
#[derive(Default)]
pub(super) struct Respawns {
    /// The uids whose node actor is to be respawned (their timer set).
    pending: HashSet<Uid>,
    /// Crashes in a row, by uid: each respawn waits longer.
    crashes: HashMap<Uid, Backoff>,
}

impl Respawns {
    /// The node actor of `uid` ended unexpectedly (or could not start): it is started again
    /// after a wait between `base` and `max`, longer with each crash in a row.
    pub(super) fn crashed(
        &mut self,
        timers: &mut Timers<SupervisorMsg>,
        uid: Uid,
        base: Duration,
        max: Duration,
    ) {
        let delay = self
            .crashes
            .entry(uid.clone())
            .or_default()
            .failed(base, max);
        self.pending.insert(uid.clone());
        timers.set(Wake::Respawn(uid), delay);
    }

    /// The respawn of `uid` is due, or no longer wanted (another drives its node): nothing
    /// of it stays pending.
    pub(super) fn over(&mut self, timers: &mut Timers<SupervisorMsg>, uid: &Uid) {
        self.pending.remove(uid);
        timers.cancel(&Wake::Respawn(uid.clone()));
    }

    /// `uid`'s actor ended for good, or ran long enough: its next crash waits the shortest.
    pub(super) fn forget_crashes(&mut self, uid: &Uid) {
        self.crashes.remove(uid);
    }

    /// The uids waiting for their respawn.
    pub(super) fn pending(&self) -> impl Iterator<Item = &Uid> {
        self.pending.iter()
    }

    /// Crash counts kept.
    pub(super) fn crash_counts(&self) -> usize {
        self.crashes.len()
    }
}
