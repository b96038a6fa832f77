//! The lease keeper: renews the node lease on a timer while the node is in maintenance, one
//! renewal at a time, and counts failures like NMO (only once the lease was held).

use std::time::Duration;

use ractor::ActorRef;

use super::messages::NodeMsg;
use crate::plan::{self, LeaseFailure};
use crate::task::TaskSlot;

/// What the node actor knows about its lease.
#[derive(Debug, Default)]
pub(super) struct LeaseKeeper {
    /// The lease was held at least once: from then on failures count (NMO counts them once
    /// evictions began, which is right after).
    held_once: bool,
    /// Uid of the node (the lease's owner), once read: a renewal that finds the lease gone
    /// re-creates it owned by the node.
    node_uid: String,
    renewing: bool,
    timer: TaskSlot,
}

impl LeaseKeeper {
    /// The lease is ours; `node_uid` is the node's.
    pub(super) fn acquired(&mut self, node_uid: &str) {
        self.held_once = true;
        self.node_uid = node_uid.to_string();
    }

    /// True once the lease was held.
    pub(super) fn held_once(&self) -> bool {
        self.held_once
    }

    /// The node's uid, as last read.
    pub(super) fn node_uid(&self) -> &str {
        &self.node_uid
    }

    /// Starts the renewal timer, unless it runs.
    pub(super) fn keep_renewing(&mut self, myself: &ActorRef<NodeMsg>, every: Duration) {
        if !self.timer.is_set() {
            self.timer
                .set(myself.send_interval(every, || NodeMsg::RenewLease));
        }
    }

    /// Stops the renewal timer.
    pub(super) fn stop_renewing(&mut self) {
        self.timer.clear();
    }

    /// A renewal is due: true when it may start (none is out).
    pub(super) fn begin_renewal(&mut self) -> bool {
        !std::mem::replace(&mut self.renewing, true)
    }

    /// The renewal ended.
    pub(super) fn renewal_ended(&mut self) {
        self.renewing = false;
    }

    /// Counts one failure to take or keep the lease onto `count` (`errorOnLeaseCount`).
    pub(super) fn count_failure(&self, count: i32) -> LeaseFailure {
        plan::lease_failure(count, self.held_once)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_count_only_once_the_lease_was_held() {
        let mut keeper = LeaseKeeper::default();
        assert_eq!(keeper.count_failure(0).count, 0);
        keeper.acquired("uid-n1");
        assert_eq!(keeper.node_uid(), "uid-n1");
        assert_eq!(keeper.count_failure(0).count, 1);
        assert!(keeper.count_failure(3).give_up);
    }

    #[test]
    fn one_renewal_at_a_time() {
        let mut keeper = LeaseKeeper::default();
        assert!(keeper.begin_renewal());
        assert!(!keeper.begin_renewal());
        keeper.renewal_ended();
        assert!(keeper.begin_renewal());
    }
}
