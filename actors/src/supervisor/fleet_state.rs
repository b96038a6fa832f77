//! The cluster maintenance budget's bookkeeping in the supervisor: the budget, the node view,
//! and the NodeMaintenances waiting for a slot with their place as decided and as written.
//! Every field is private and changed here, through methods named after what happened;
//! `fleet_admission` acts on what they answer.

use std::collections::HashMap;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::fleet::{self, Candidate, FleetBudget, NodeView, Waiting};
use crate::model::{
    Maintenance, MaintenanceName, NodeName, NodeSummaryEvent, Phase, QueuePlace, Uid,
};
use crate::task::TaskSlot;

/// The budget's state in the supervisor.
pub(super) struct Fleet {
    budget: FleetBudget,
    nodes: NodeView,
    /// The NodeMaintenance watch has listed every object once: who holds a slot is known.
    listed: bool,
    /// The waiting NodeMaintenances, by uid.
    queue: HashMap<Uid, Queued>,
    /// The node summary watch, forwarded as [`super::messages::SupervisorMsg::Nodes`].
    node_feed: TaskSlot,
}

/// One waiting NodeMaintenance.
struct Queued {
    /// As last seen.
    nm: Maintenance,
    /// Its place as last decided.
    wanted: Option<Waiting>,
    /// Its place as the API has it.
    written: Option<QueuePlace>,
    /// The place being written.
    writing: Option<QueuePlace>,
    /// When its status was last written (a later move waits `queue_status_interval`).
    written_at: Option<Instant>,
    /// Its `QueuedMaintenance` event was emitted.
    announced: bool,
    /// Allowed to start while its status write was out: it starts when the write returns
    /// (so that write never lands on the node actor's status), holding a slot meanwhile.
    admitted: bool,
}

/// What the budget decided, by uid.
pub(super) struct Admissions {
    /// These leave the queue and start now, oldest first.
    pub(super) start: Vec<Maintenance>,
    /// These keep waiting; their place may need writing.
    pub(super) waiting: Vec<Uid>,
}

/// A waiting NodeMaintenance's place, to be written now.
pub(super) struct QueueWrite {
    /// The NodeMaintenance as last seen (its status is the write's base and precondition).
    pub(super) nm: Maintenance,
    /// Its place.
    pub(super) waiting: Waiting,
    /// The first write: its `QueuedMaintenance` event goes with it.
    pub(super) first: bool,
}

/// How a waiting NodeMaintenance's status write ended, as the queue sees it.
pub(super) struct WriteEnded {
    /// Its name.
    pub(super) name: MaintenanceName,
    /// Let in while the write was out: it left the queue and starts now.
    pub(super) start: Option<Maintenance>,
}

impl Queued {
    fn new(nm: Maintenance) -> Self {
        Queued {
            nm,
            wanted: None,
            written: None,
            writing: None,
            written_at: None,
            announced: false,
            admitted: false,
        }
    }
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

    /// Whether the budget limits anything (without one, nothing is ever queued).
    pub(super) fn is_limited(&self) -> bool {
        self.budget.is_limited()
    }

    /// Whether the budget counts the cluster's nodes (so needs their watch).
    pub(super) fn watches_nodes(&self) -> bool {
        self.budget.watches_nodes()
    }

    /// The task forwarding the node summary watch; aborted with the supervisor.
    pub(super) fn feed_nodes(&mut self, task: JoinHandle<()>) {
        self.node_feed.set(task);
    }

    /// The NodeMaintenance watch listed everything.
    pub(super) fn maintenances_listed(&mut self) {
        self.listed = true;
    }

    /// A change in the cluster's nodes.
    pub(super) fn nodes_changed(&mut self, event: NodeSummaryEvent) {
        self.nodes.apply(event);
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

    /// `nm` starts waiting.
    pub(super) fn enqueue(&mut self, nm: Maintenance) {
        self.queue.insert(nm.uid.clone(), Queued::new(nm));
    }

    /// A waiting NodeMaintenance was seen again: keeps the new copy. `None` when `nm` does
    /// not wait; otherwise whether it may leave the queue for a start made elsewhere (neither
    /// let in nor with a status write out).
    pub(super) fn seen(&mut self, nm: &Maintenance) -> Option<bool> {
        let queued = self.queue.get_mut(&nm.uid)?;
        queued.nm = nm.clone();
        Some(!queued.admitted && queued.writing.is_none())
    }

    /// Takes `uid` out of the queue.
    pub(super) fn remove(&mut self, uid: &Uid) -> Option<Maintenance> {
        self.queue.remove(uid).map(|queued| queued.nm)
    }

    /// The waiting NodeMaintenances already let in (their start waits for a status write).
    pub(super) fn admitted(&self) -> impl Iterator<Item = &Uid> {
        self.queue
            .iter()
            .filter(|(_, q)| q.admitted)
            .map(|(uid, _)| uid)
    }

    /// Whether the budget has anything to decide: a budget, someone waiting, and the
    /// NodeMaintenances and (when counted) the nodes listed since start.
    pub(super) fn has_decisions(&self) -> bool {
        self.budget.is_limited()
            && self.listed
            && !self.queue.is_empty()
            && (!self.budget.watches_nodes() || self.nodes.is_listed())
    }

    /// Asks the budget who starts, given the nodes of the NodeMaintenances holding a slot.
    /// `None` when there is nothing to decide yet: no budget, an empty queue, or the
    /// NodeMaintenances or (when counted) the nodes not listed since start.
    pub(super) fn decide(&mut self, holders: &[NodeName]) -> Option<Admissions> {
        if !self.has_decisions() {
            return None;
        }
        let decision = {
            let candidates: Vec<Candidate<'_>> = self
                .queue
                .values()
                .filter(|q| !q.admitted)
                .map(|q| Candidate {
                    name: q.nm.name.as_str(),
                    node: q.nm.node_name.as_str(),
                    created: q.nm.creation_timestamp,
                })
                .collect();
            fleet::decide(
                &self.budget,
                &self.nodes,
                holders.iter().map(NodeName::as_str),
                &candidates,
            )
        };
        // The budget names them; the queue knows them by uid (names are unique among the
        // NodeMaintenances that exist).
        let uids: HashMap<MaintenanceName, Uid> = self
            .queue
            .iter()
            .map(|(uid, q)| (q.nm.name.clone(), uid.clone()))
            .collect();
        let uid_of = |name: &str| uids.get(name).cloned().unwrap_or_default();
        let mut start = Vec::new();
        for uid in decision.admit.iter().map(|name| uid_of(name)) {
            let Some(queued) = self.queue.get_mut(&uid) else {
                continue;
            };
            if queued.writing.is_some() {
                queued.admitted = true;
            } else if let Some(nm) = self.remove(&uid) {
                start.push(nm);
            }
        }
        let mut waiting = Vec::new();
        for place in decision.waiting {
            let uid = uid_of(&place.name);
            if let Some(queued) = self.queue.get_mut(&uid) {
                queued.wanted = Some(place);
            }
            waiting.push(uid);
        }
        Some(Admissions { start, waiting })
    }

    /// The place of `uid` to write now, if it changed and the last write is old enough
    /// (`interval` x ceil(position / 10)); marks it being written.
    pub(super) fn start_write(
        &mut self,
        uid: &Uid,
        now: Instant,
        interval: Duration,
    ) -> Option<QueueWrite> {
        let queued = self.queue.get_mut(uid)?;
        let waiting = queued.wanted.clone()?;
        let place = QueuePlace {
            position: waiting.position,
            waiting_for: waiting.reason.short(),
        };
        // Further back, moves matter less and there are more of them: a place is rewritten at
        // most every `interval` x ceil(position / 10), so a queue of thousands costs a few
        // writes a second, not one per waiting maintenance each time the queue moves.
        let interval = interval.saturating_mul(waiting.position.div_ceil(10).max(1));
        let due = queued.written_at.is_none_or(|at| now >= at + interval);
        if queued.writing.is_some() || queued.written.as_ref() == Some(&place) || !due {
            return None;
        }
        queued.writing = Some(place);
        queued.written_at = Some(now);
        Some(QueueWrite {
            nm: queued.nm.clone(),
            waiting,
            first: !queued.announced,
        })
    }

    /// Whether `uid` waits in the queue.
    pub(super) fn contains(&self, uid: &Uid) -> bool {
        self.queue.contains_key(uid)
    }

    /// The status write of `uid` ended, `written` or not (then tried again on a later tick).
    /// `None` when `uid` no longer waits.
    pub(super) fn write_ended(&mut self, uid: &Uid, written: bool) -> Option<WriteEnded> {
        let queued = self.queue.get_mut(uid)?;
        let name = queued.nm.name.clone();
        let place = queued.writing.take();
        if written {
            queued.written = place;
            queued.announced = true;
        }
        let start = if queued.admitted {
            self.remove(uid)
        } else {
            None
        };
        Some(WriteEnded { name, start })
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
