//! The cluster maintenance budget's bookkeeping in the supervisor: the budget, the node view,
//! and the NodeMaintenances waiting for a slot with their place as decided and as written.

use std::collections::HashMap;

use tokio::time::Instant;

use crate::fleet::{FleetBudget, NodeView, Waiting};
use crate::model::{Maintenance, Phase, QueuePlace, Uid};
use crate::task::TaskSlot;

/// The budget's state in the supervisor.
pub(super) struct Fleet {
    pub(super) budget: FleetBudget,
    pub(super) nodes: NodeView,
    /// The NodeMaintenance watch has listed every object once: who holds a slot is known.
    pub(super) listed: bool,
    /// The waiting NodeMaintenances, by uid.
    pub(super) queue: HashMap<Uid, Queued>,
    /// The node summary watch, forwarded as [`SupervisorMsg::Nodes`].
    pub(super) node_feed: TaskSlot,
}

/// One waiting NodeMaintenance.
pub(super) struct Queued {
    /// As last seen.
    pub(super) nm: Maintenance,
    /// Its place as last decided.
    pub(super) wanted: Option<Waiting>,
    /// Its place as the API has it.
    pub(super) written: Option<QueuePlace>,
    /// The place being written.
    pub(super) writing: Option<QueuePlace>,
    /// When its status was last written (a later move waits `queue_status_interval`).
    pub(super) written_at: Option<Instant>,
    /// Its `QueuedMaintenance` event was emitted.
    pub(super) announced: bool,
    /// Allowed to start while its status write was out: it starts when the write returns
    /// (so that write never lands on the node actor's status), holding a slot meanwhile.
    pub(super) admitted: bool,
}

impl Fleet {
    pub(super) fn new(budget: FleetBudget) -> Self {
        Fleet {
            budget,
            nodes: NodeView::default(),
            listed: false,
            queue: HashMap::new(),
            node_feed: TaskSlot::default(),
        }
    }

    /// Whether `nm` must wait for the budget before its node actor starts. Only one that has
    /// not started yet: one carrying nmo's finalizer started before (maybe under another
    /// leader, or before a restart) and holds its slot; a deleted or Failed one only ever
    /// undoes or waits, which the budget never delays.
    pub(super) fn must_wait(&self, nm: &Maintenance) -> bool {
        self.budget.is_limited()
            && !nm.deleting
            && !nm.has_finalizer()
            && nm.status.as_ref().and_then(|s| s.phase) != Some(Phase::Failed)
    }

    /// The waiting NodeMaintenances in queue order.
    pub(super) fn queue_order(&self) -> Vec<String> {
        let mut waiting: Vec<&Maintenance> = self
            .queue
            .values()
            .filter(|q| !q.admitted)
            .map(|q| &q.nm)
            .collect();
        waiting
            .sort_by(|a, b| (a.creation_timestamp, &a.name).cmp(&(b.creation_timestamp, &b.name)));
        waiting.into_iter().map(|nm| nm.name.to_string()).collect()
    }
}
