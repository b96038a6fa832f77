//! The node actor's copy of its NodeMaintenance: what the watch and the re-reads delivered, and
//! whether the copy at hand may predate the writes of a crashed actor. Only this file changes
//! it; the transitions say what happened (an update, a re-read, a deletion).

use crate::model::{DrainPolicy, FINALIZER, Maintenance};

/// The NodeMaintenance as last seen.
#[derive(Debug)]
pub(super) struct MaintenanceCopy {
    nm: Maintenance,
    /// The first reconcile re-reads the NodeMaintenance (crash safety); true once it did, or
    /// when the copy at hand came straight from the watch.
    fresh: bool,
}

impl MaintenanceCopy {
    /// `nm` as the actor starts with it; `fresh` when it was just delivered by the watch.
    pub(super) fn new(nm: Maintenance, fresh: bool) -> Self {
        MaintenanceCopy { nm, fresh }
    }

    /// The NodeMaintenance as last seen.
    pub(super) fn seen(&self) -> &Maintenance {
        &self.nm
    }

    /// Whether the copy is known to be current (no re-read needed before acting on it).
    pub(super) fn fresh(&self) -> bool {
        self.fresh
    }

    /// Nothing is to be re-read (a deletion needs no re-read first).
    pub(super) fn needs_no_reread(&mut self) {
        self.fresh = true;
    }

    /// The watch delivered `nm` (a deletion, say): it replaces the copy.
    pub(super) fn replaced(&mut self, nm: Maintenance) {
        self.nm = nm;
    }

    /// A re-read delivered `nm`: it replaces the copy, which is current from now on.
    pub(super) fn reread(&mut self, nm: Maintenance) {
        self.fresh = true;
        self.nm = nm;
    }

    /// A failed maintenance starts anew with `nm`'s spec.
    pub(super) fn restarted(&mut self, nm: Maintenance) {
        self.nm.reason = nm.reason;
        self.nm.drain_policy = nm.drain_policy;
        self.nm.invalid = nm.invalid;
    }

    /// The maintenance goes on under `nm`: its reason, finalizers and spec check (the drain
    /// policy goes through [`Self::drain_policy_now`]).
    pub(super) fn continued(&mut self, nm: &Maintenance) {
        self.nm.reason.clone_from(&nm.reason);
        self.nm.finalizers.clone_from(&nm.finalizers);
        self.nm.invalid.clone_from(&nm.invalid);
    }

    /// The drain policy is `policy` now: true when that changed it.
    pub(super) fn drain_policy_now(&mut self, policy: DrainPolicy) -> bool {
        if self.nm.drain_policy == policy {
            return false;
        }
        self.nm.drain_policy = policy;
        true
    }

    /// The NodeMaintenance is gone from the API (or is going).
    pub(super) fn deleted(&mut self) {
        self.nm.deleting = true;
    }

    /// nmo's finalizer was added (by the reconcile that just ended).
    pub(super) fn finalizer_added(&mut self) {
        if !self.nm.has_finalizer() {
            self.nm.finalizers.push(FINALIZER.to_string());
        }
    }
}
