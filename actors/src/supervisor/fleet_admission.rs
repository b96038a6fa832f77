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

use futures::StreamExt;
use ractor::ActorRef;
use tokio::time::Instant;

use super::fleet_state::QueueWrite;
use super::messages::SupervisorMsg;
use super::messages::Wake;
use super::state::SupervisorState;
use crate::fleet;
use crate::model::{
    Event, EventTarget, EventType, Maintenance, NodeName, NodeSummaryEvent, Phase,
    StatusPrecondition, Uid, reasons,
};
use crate::ports::ClusterError;

impl SupervisorState {
    /// Starts the budget's timer and, when it counts nodes, the node summary watch.
    pub(super) fn start_fleet(&mut self, myself: &ActorRef<SupervisorMsg>) {
        if !self.fleet.is_limited() {
            return;
        }
        let interval = self.config.queue_status_interval;
        self.timers.every(Wake::FleetTick, interval);
        if self.fleet.watches_nodes() {
            let cluster = self.cluster.clone();
            let retry = self.config.retry_interval;
            let me = myself.clone();
            self.fleet.feed_nodes(tokio::spawn(async move {
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
        // Registered as the node's driver, so a second NodeMaintenance for the node is a
        // duplicate of this one (the older drives), as for a running one.
        self.drivers.drives(&nm.node_name, &nm.uid);
        self.fleet.enqueue(nm);
        self.admit(myself).await;
    }

    /// A NodeMaintenance changed; true when it waits in the queue (then handled here).
    pub(super) async fn queued_changed(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        nm: &Maintenance,
    ) -> bool {
        let Some(may_leave) = self.fleet.seen(nm) else {
            return false;
        };
        if nm.deleting {
            // Nothing of ours is on the node: nothing to undo.
            self.dequeue(&nm.uid);
        } else if nm.has_finalizer() && may_leave {
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
        if let Some(nm) = self.fleet.remove(uid) {
            self.drivers.freed(&nm.node_name, uid);
        }
    }

    /// The NodeMaintenance watch listed everything.
    pub(super) async fn listed(&mut self, myself: &ActorRef<SupervisorMsg>) {
        self.fleet.maintenances_listed();
        self.admit(myself).await;
    }

    /// A change in the cluster's nodes.
    pub(super) async fn nodes_changed(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        event: NodeSummaryEvent,
    ) {
        self.fleet.nodes_changed(event);
        self.admit(myself).await;
    }

    /// The nodes of the NodeMaintenances holding a slot: every one with a node actor (or one
    /// being restarted, or let in while its last queue write was out), unless Failed.
    fn slot_holders(&self) -> Vec<NodeName> {
        self.children
            .uids()
            .chain(self.respawns.pending())
            .chain(self.fleet.admitted())
            .filter_map(|uid| self.known.get(uid))
            .filter(|nm| nm.status.as_ref().and_then(|s| s.phase) != Some(Phase::Failed))
            .map(|nm| nm.node_name.clone())
            .collect()
    }

    /// Asks the budget who starts, starts them, and brings the others' status up to date.
    pub(super) async fn admit(&mut self, myself: &ActorRef<SupervisorMsg>) {
        // Nothing to decide (nor to write) before the NodeMaintenances and the nodes are
        // counted; and the slot holders are counted only when there is (admit runs on every
        // change a node actor reports).
        if !self.fleet.has_decisions() {
            return;
        }
        let holders = self.slot_holders();
        let Some(admissions) = self.fleet.decide(&holders) else {
            return;
        };
        for nm in admissions.start {
            self.spawn(myself, nm, true).await;
        }
        for uid in admissions.waiting {
            self.write_queued(myself, &uid);
        }
    }

    /// Writes a waiting NodeMaintenance's place, when it changed and the last write is old
    /// enough (the first is written at once, with its `QueuedMaintenance` event).
    fn write_queued(&mut self, myself: &ActorRef<SupervisorMsg>, uid: &Uid) {
        let interval = self.config.queue_status_interval;
        let Some(QueueWrite { nm, waiting, first }) =
            self.fleet.start_write(uid, Instant::now(), interval)
        else {
            return;
        };
        let mut status = nm.status.clone().unwrap_or_default();
        fleet::mark_queued(&mut status, &waiting, self.config.now());
        let event = first.then(|| Event {
            target: EventTarget::Maintenance {
                name: nm.name.clone(),
                uid: nm.uid.clone(),
            },
            type_: EventType::Normal,
            reason: reasons::QUEUED.to_string(),
            message: format!(
                "Node maintenance for node {} is queued: position {}, {}",
                nm.node_name, waiting.position, waiting.reason
            ),
        });
        let cluster = self.cluster.clone();
        // Over the status as last seen: one a node actor or another replica wrote meanwhile
        // is refused, and the next write goes over the copy the watch then delivers.
        let seen = StatusPrecondition::over(nm.status.as_ref());
        let work = async move {
            cluster
                .write_status(&nm.name, &nm.uid, seen, &status)
                .await?;
            if let Some(event) = event
                && let Err(error) = cluster.emit_event(&event).await
            {
                // Events are best effort.
                tracing::warn!(maintenance = %nm.name, %error, "cannot emit event");
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
        if !self.fleet.contains(uid) {
            return; // deleted meanwhile
        }
        if let Err(ClusterError::NotFound(_)) = result {
            self.dequeue(uid);
            self.admit(myself).await;
            return;
        }
        let Some(ended) = self.fleet.write_ended(uid, result.is_ok()) else {
            return;
        };
        if let Err(error) = result {
            // Tried again once `queue_status_interval` has passed (on the budget's tick).
            tracing::warn!(maintenance = %ended.name, %error, "cannot write the queue status");
        }
        if let Some(nm) = ended.start {
            self.spawn(myself, nm, true).await;
        }
        self.admit(myself).await;
    }
}
