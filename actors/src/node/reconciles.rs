//! What the node actor keeps about its reconciles: when the running one began (a lease it takes
//! is nmo's from then on), and whether the next must repair the node. Only this file changes
//! it.

use tokio::time::Instant;

/// The reconciles' bookkeeping.
#[derive(Debug, Default)]
pub(super) struct Reconciles {
    /// When the running reconcile was started.
    sent: Option<Instant>,
    /// The node drifted: the next operation re-applies label, taints and cordon.
    repair_due: bool,
}

impl Reconciles {
    /// A reconcile starts now.
    pub(super) fn started(&mut self) {
        self.sent = Some(Instant::now());
    }

    /// The reconcile ended: when it was started, if known.
    pub(super) fn ended(&mut self) -> Option<Instant> {
        self.sent.take()
    }

    /// The node changed under maintenance: the next operation repairs it.
    pub(super) fn node_drifted(&mut self) {
        self.repair_due = true;
    }

    /// Whether the next operation must repair the node.
    pub(super) fn repair_due(&self) -> bool {
        self.repair_due
    }

    /// The repair is on its way (the reconcile that re-applies the node's changes starts).
    pub(super) fn repairing(&mut self) {
        self.repair_due = false;
    }
}
