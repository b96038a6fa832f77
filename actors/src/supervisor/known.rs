//! The NodeMaintenances the supervisor knows: the latest copy of each while it exists in the
//! API, and those whose undo finished before their deletion arrived. Changed only here.

use std::collections::{HashMap, HashSet};

use crate::model::{Maintenance, Uid};

/// Latest object per NodeMaintenance uid, and the undone ones.
#[derive(Default)]
pub(super) struct Known {
    /// Latest object per NodeMaintenance uid, while it exists in the API.
    latest: HashMap<Uid, Maintenance>,
    /// NodeMaintenances whose undo finished while the API still had them (their last update
    /// may still arrive); forgotten when the deletion arrives.
    finished: HashSet<Uid>,
}

impl Known {
    /// `nm` (as `kept`) is the latest copy of NodeMaintenance `uid`.
    pub(super) fn seen(&mut self, uid: Uid, kept: Maintenance) {
        self.latest.insert(uid, kept);
    }

    /// The latest copy of `uid`.
    pub(super) fn get(&self, uid: &Uid) -> Option<&Maintenance> {
        self.latest.get(uid)
    }

    /// Every NodeMaintenance known.
    pub(super) fn all(&self) -> impl Iterator<Item = &Maintenance> {
        self.latest.values()
    }

    /// The uids known under `nm`'s name but another uid: gone from the API, even if their
    /// deletion has not been reported yet (names are unique).
    pub(super) fn replaced_by(&self, nm: &Maintenance) -> Vec<Uid> {
        self.latest
            .values()
            .filter(|known| known.name == nm.name && known.uid != nm.uid)
            .map(|known| known.uid.clone())
            .collect()
    }

    /// `uid` is gone from the API: forgotten.
    pub(super) fn deleted(&mut self, uid: &Uid) {
        self.latest.remove(uid);
        self.finished.remove(uid);
    }

    /// `uid`'s undo finished: remembered while the API still has it (its deletion, which
    /// forgets it, is due).
    pub(super) fn undone(&mut self, uid: &Uid) {
        if self.latest.contains_key(uid) {
            self.finished.insert(uid.clone());
        }
    }

    /// Whether nothing of nmo's is left on `nm`: deleted, and without nmo's finalizer or
    /// undone already.
    pub(super) fn nothing_left_on(&self, nm: &Maintenance) -> bool {
        nm.deleting && (!nm.has_finalizer() || self.finished.contains(&nm.uid))
    }

    /// NodeMaintenances known, and undone ones whose deletion is still to arrive.
    pub(super) fn sizes(&self) -> (usize, usize) {
        (self.latest.len(), self.finished.len())
    }
}
