//! The supervisor's side of the cluster maintenance budget ([`crate::fleet`]): which
//! NodeMaintenances wait, what their status says, and starting them when the budget allows.
//!
//! A waiting NodeMaintenance has no node actor and touches nothing: no finalizer, no lease, no
//! node change. Its status says `phase: Running`, its place in `queue` and a `Queued`
//! condition; one `QueuedMaintenance` event is emitted when it starts waiting, and its start
//! is the node actor's usual `BeginMaintenance`. Deleting it needs nothing from nmo (no
//! finalizer), so it undoes nothing. Every decision is taken again whenever something the
//! budget counts changes (a NodeMaintenance, a node, a node actor ending), so a freed slot is
//! taken within the handling of the message that freed it.

use std::collections::HashMap;

use futures::StreamExt;
use ractor::ActorRef;
use tokio::time::Instant;

use super::fleet_state::Queued;
use super::messages::SupervisorMsg;
use super::messages::Wake;
use super::state::SupervisorState;
use crate::fleet::{self, Candidate};
use crate::model::{
    Event, EventTarget, EventType, Maintenance, MaintenanceName, NodeName, NodeSummaryEvent, Phase,
    QueuePlace, StatusPrecondition, Uid, reasons,
};
use crate::ports::ClusterError;

impl SupervisorState {
    /// Starts the budget's timer and, when it counts nodes, the node summary watch.
    pub(super) fn start_fleet(&mut self, myself: &ActorRef<SupervisorMsg>) {
        if !self.fleet.budget.is_limited() {
            return;
        }
        let interval = self.config.queue_status_interval;
        self.timers.every(Wake::FleetTick, interval);
        if self.fleet.budget.watches_nodes() {
            let cluster = self.cluster.clone();
            let retry = self.config.retry_interval;
            let me = myself.clone();
            self.fleet.node_feed.set(tokio::spawn(async move {
                loop {
                    let mut events = cluster.watch_node_summaries();
                    while let Some(event) = events.next().await {
                        if me.cast(SupervisorMsg::Nodes(event)).is_err() {
                            return; // the supervisor is gone
                        }
                    }
                    tracing::warn!("the node summary watch ended; watching again");
                    tokio::time::sleep(retry).await;
                }
            }));
        }
    }

    /// Starts the node actor of a NodeMaintenance that drives no node yet, or queues it when
    /// the budget says so.
    pub(super) async fn start_or_queue(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        nm: Maintenance,
    ) {
        if !self.fleet.must_wait(&nm) {
            self.spawn(myself, nm, true).await;
            return;
        }
        let uid = nm.uid.clone();
        // Registered as the node's driver, so a second NodeMaintenance for the node is a
        // duplicate of this one (the older drives), as for a running one.
        self.drivers.drives(&nm.node_name, &uid);
        self.fleet.queue.insert(
            uid,
            Queued {
                nm,
                wanted: None,
                written: None,
                writing: None,
                written_at: None,
                announced: false,
                admitted: false,
            },
        );
        self.admit(myself).await;
    }

    /// A NodeMaintenance changed; true when it waits in the queue (then handled here).
    pub(super) async fn queued_changed(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        nm: &Maintenance,
    ) -> bool {
        let Some(queued) = self.fleet.queue.get_mut(&nm.uid) else {
            return false;
        };
        queued.nm = nm.clone();
        if nm.deleting {
            // Nothing of ours is on the node: nothing to undo.
            self.dequeue(&nm.uid);
        } else if nm.has_finalizer() && !queued.admitted && queued.writing.is_none() {
            // Started by someone else meanwhile (a previous leader): it holds its slot.
            let nm = nm.clone();
            self.dequeue(&nm.uid);
            self.drivers.drives(&nm.node_name, &nm.uid);
            self.spawn(myself, nm, true).await;
        }
        self.admit(myself).await;
        true
    }

    /// Forgets a waiting NodeMaintenance (deleted, or found to be a duplicate), by uid.
    pub(super) fn dequeue(&mut self, uid: &Uid) {
        if let Some(queued) = self.fleet.queue.remove(uid) {
            self.drivers.freed(&queued.nm.node_name, uid);
        }
    }

    /// The NodeMaintenance watch listed everything.
    pub(super) async fn listed(&mut self, myself: &ActorRef<SupervisorMsg>) {
        self.fleet.listed = true;
        self.admit(myself).await;
    }

    /// A change in the cluster's nodes.
    pub(super) async fn nodes_changed(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        event: NodeSummaryEvent,
    ) {
        self.fleet.nodes.apply(event);
        self.admit(myself).await;
    }

    /// The nodes of the NodeMaintenances holding a slot: every one with a node actor (or one
    /// being restarted, or let in while its last queue write was out), unless Failed.
    fn slot_holders(&self) -> Vec<NodeName> {
        let admitted = self
            .fleet
            .queue
            .iter()
            .filter(|(_, q)| q.admitted)
            .map(|(uid, _)| uid);
        self.children
            .uids()
            .chain(self.respawns.pending())
            .chain(admitted)
            .filter_map(|uid| self.known.get(uid))
            .filter(|nm| nm.status.as_ref().and_then(|s| s.phase) != Some(Phase::Failed))
            .map(|nm| nm.node_name.clone())
            .collect()
    }

    /// Asks the budget who starts, starts them, and brings the others' status up to date.
    pub(super) async fn admit(&mut self, myself: &ActorRef<SupervisorMsg>) {
        if !self.fleet.budget.is_limited() || !self.fleet.listed || self.fleet.queue.is_empty() {
            return;
        }
        if self.fleet.budget.watches_nodes() && !self.fleet.nodes.is_listed() {
            // Just started: nothing to decide (nor to write) before the nodes are counted.
            return;
        }
        let holders = self.slot_holders();
        let decision = {
            let candidates: Vec<Candidate<'_>> = self
                .fleet
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
                &self.fleet.budget,
                &self.fleet.nodes,
                holders.iter().map(NodeName::as_str),
                &candidates,
            )
        };
        // The budget names them; the queue knows them by uid (names are unique among the
        // NodeMaintenances that exist).
        let uids: HashMap<MaintenanceName, Uid> = self
            .fleet
            .queue
            .iter()
            .map(|(uid, q)| (q.nm.name.clone(), uid.clone()))
            .collect();
        let uid_of = |name: &str| uids.get(name).cloned().unwrap_or_default();
        for uid in decision.admit.iter().map(|name| uid_of(name)) {
            let Some(queued) = self.fleet.queue.get_mut(&uid) else {
                continue;
            };
            if queued.writing.is_some() {
                queued.admitted = true;
                continue;
            }
            if let Some(queued) = self.fleet.queue.remove(&uid) {
                self.spawn(myself, queued.nm, true).await;
            }
        }
        for waiting in decision.waiting {
            let uid = uid_of(&waiting.name);
            if let Some(queued) = self.fleet.queue.get_mut(&uid) {
                queued.wanted = Some(waiting);
            }
            self.write_queued(myself, &uid);
        }
    }

    /// Writes a waiting NodeMaintenance's place, when it changed and the last write is old
    /// enough (the first is written at once, with its `QueuedMaintenance` event).
    fn write_queued(&mut self, myself: &ActorRef<SupervisorMsg>, uid: &Uid) {
        let now = Instant::now();
        let interval = self.config.queue_status_interval;
        let wall = self.config.now();
        let Some(queued) = self.fleet.queue.get_mut(uid) else {
            return;
        };
        let Some(waiting) = &queued.wanted else {
            return;
        };
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
            return;
        }
        let mut status = queued.nm.status.clone().unwrap_or_default();
        fleet::mark_queued(&mut status, waiting, wall);
        let event = (!queued.announced).then(|| Event {
            target: EventTarget::Maintenance {
                name: queued.nm.name.clone(),
                uid: queued.nm.uid.clone(),
            },
            type_: EventType::Normal,
            reason: reasons::QUEUED.to_string(),
            message: format!(
                "Node maintenance for node {} is queued: position {}, {}",
                queued.nm.node_name, waiting.position, waiting.reason
            ),
        });
        queued.writing = Some(place);
        queued.written_at = Some(now);
        let cluster = self.cluster.clone();
        let target = queued.nm.name.clone();
        let target_uid = queued.nm.uid.clone();
        // Over the status as last seen: one a node actor or another replica wrote meanwhile
        // is refused, and the next write goes over the copy the watch then delivers.
        let seen = StatusPrecondition::over(queued.nm.status.as_ref());
        let work = async move {
            cluster
                .write_status(&target, &target_uid, seen, &status)
                .await?;
            if let Some(event) = event
                && let Err(error) = cluster.emit_event(&event).await
            {
                // Events are best effort.
                tracing::warn!(maintenance = %target, %error, "cannot emit event");
            }
            Ok(())
        };
        let uid = uid.clone();
        self.tasks
            .spawn_cast_back(myself, tracing::Span::none(), work, move |result| {
                SupervisorMsg::QueueWritten { uid, result }
            });
    }

    /// A waiting NodeMaintenance's status write ended (by uid).
    pub(super) async fn queue_written(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        uid: &Uid,
        result: Result<(), ClusterError>,
    ) {
        let Some(queued) = self.fleet.queue.get_mut(uid) else {
            return; // deleted meanwhile
        };
        let name = queued.nm.name.clone();
        let place = queued.writing.take();
        match result {
            Ok(()) => {
                queued.written = place;
                queued.announced = true;
            }
            Err(ClusterError::NotFound(_)) => {
                self.dequeue(uid);
                self.admit(myself).await;
                return;
            }
            // Tried again once `queue_status_interval` has passed (on the budget's tick).
            Err(error) => {
                tracing::warn!(maintenance = %name, %error, "cannot write the queue status");
            }
        }
        if queued.admitted
            && let Some(queued) = self.fleet.queue.remove(uid)
        {
            self.spawn(myself, queued.nm, true).await;
        }
        self.admit(myself).await;
    }
}
