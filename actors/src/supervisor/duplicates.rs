//! The NodeMaintenances found to be duplicates (what the supervisor does with them is in
//! `duplicate_tracking`): each one's latest version, the one it duplicates, and its op runner.

use std::collections::HashMap;

use crate::model::{Maintenance, MaintenanceName, Uid};
use crate::op_runner::OpRunner;

/// A NodeMaintenance found to be a duplicate.
pub(super) struct Duplicate {
    /// The NodeMaintenance that drives the node.
    pub(super) active: MaintenanceName,
    /// The duplicate as last seen.
    pub(super) latest: Maintenance,
    /// Its cluster calls, one run at a time.
    pub(super) ops: OpRunner,
}

/// The NodeMaintenances found to be duplicates, by uid; their entries change only here (their
/// op runners through their own methods).
#[derive(Default)]
pub(super) struct Duplicates(HashMap<Uid, Duplicate>);

impl Duplicates {
    /// `nm` (uid `uid`) is seen, a duplicate of `active`: its entry, made or brought up to date.
    pub(super) fn seen(
        &mut self,
        uid: Uid,
        nm: Maintenance,
        active: MaintenanceName,
    ) -> &mut Duplicate {
        let duplicate = self.0.entry(uid).or_insert_with(|| Duplicate {
            active: active.clone(),
            latest: nm.clone(),
            ops: OpRunner::default(),
        });
        duplicate.active = active;
        duplicate.latest = nm;
        duplicate
    }

    /// The duplicate `uid`, to run its cluster calls.
    pub(super) fn get_mut(&mut self, uid: &Uid) -> Option<&mut Duplicate> {
        self.0.get_mut(uid)
    }

    /// The NodeMaintenance that `uid` is a duplicate of, if it is one.
    pub(super) fn active_of(&self, uid: &Uid) -> Option<MaintenanceName> {
        self.0.get(uid).map(|d| d.active.clone())
    }

    /// Whether `uid` is a duplicate.
    pub(super) fn is_duplicate(&self, uid: &Uid) -> bool {
        self.0.contains_key(uid)
    }

    /// `uid` is gone from the API: forgotten.
    pub(super) fn deleted(&mut self, uid: &Uid) {
        self.0.remove(uid);
    }

    /// Duplicates known.
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}
