//! What the supervisor knows and does: its node actors by NodeMaintenance uid, the nodes they
//! drive, respawns of crashed actors and the orphan sweep. (The cluster maintenance budget's
//! part of it is in `fleet_state` and `fleet_admission`, the duplicates' in `duplicate_decision` and `duplicate_tracking`.)

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorId, ActorRef};
use tokio::time::Instant;

use super::duplicate_decision;
use super::fleet_state::Fleet;
use super::messages::SupervisorMsg;
use crate::config::Config;
use crate::decisions;
use crate::eviction::EvictionMsg;
use crate::model::{Maintenance, MaintenanceName, NodeName, Uid};
use crate::node::{NodeActor, NodeArgs, NodeMsg};
use crate::op_runner::OpRunner;
use crate::ports::Cluster;
use crate::retry::{Backoff, Pacer};
use crate::stop::StopReason;
use crate::sweep::{self, SweepReport};
use crate::task::{TaskSet, TaskSlot};

/// A node actor that ran this long before crashing starts its next respawn from the shortest
/// wait again.
const STABLE_RUN: Duration = Duration::from_secs(600);

pub(super) struct Child {
    pub(super) actor: ActorRef<NodeMsg>,
    pub(super) name: MaintenanceName,
    pub(super) node: NodeName,
    pub(super) started: Instant,
}

/// A NodeMaintenance found to be a duplicate.
pub(super) struct Duplicate {
    /// The NodeMaintenance that drives the node.
    pub(super) active: MaintenanceName,
    /// The duplicate as last seen.
    pub(super) latest: Maintenance,
    /// Its cluster calls, one run at a time.
    pub(super) ops: OpRunner,
}

/// State of [`super::Supervisor`]. NodeMaintenances are known by uid: one deleted and created again
/// under the same name is another maintenance, which starts once the old one's undo is over.
pub struct SupervisorState {
    pub(super) cluster: Arc<dyn Cluster>,
    pub(super) config: Arc<Config>,
    pub(super) evictor: ActorRef<EvictionMsg>,
    /// Latest object per NodeMaintenance uid, while it exists in the API.
    pub(super) known: HashMap<Uid, Maintenance>,
    /// Node actors by NodeMaintenance uid.
    pub(super) children: HashMap<Uid, Child>,
    pub(super) by_id: HashMap<ActorId, Uid>,
    /// Node name -> uid of the NodeMaintenance driving it (kept while its actor restarts and
    /// while it undoes a maintenance already gone from the API).
    pub(super) drivers: HashMap<NodeName, Uid>,
    /// Node actors stopped on purpose (their termination needs no reaction).
    pub(super) superseded: HashSet<ActorId>,
    /// NodeMaintenances found to be duplicates, by uid.
    pub(super) duplicates: HashMap<Uid, Duplicate>,
    /// NodeMaintenances whose undo finished while the API still had them (their last update
    /// may still arrive); forgotten when the deletion arrives.
    pub(super) finished: HashSet<Uid>,
    /// Pending respawns, by uid.
    pub(super) respawns: HashMap<Uid, TaskSlot>,
    /// Crashes in a row, by uid: each respawn waits longer.
    pub(super) crashes: HashMap<Uid, Backoff>,
    /// Spreads the start-up of maintenances resumed at once.
    pub(super) pacer: Pacer,
    /// The orphan sweep, one run at a time.
    pub(super) sweeps: OpRunner,
    /// A sweep retry after a failed one.
    pub(super) sweep_retry: TaskSlot,
    pub(super) sweep_failures: Backoff,
    /// The cluster work of duplicates and sweeps: aborted and awaited when stopping.
    pub(super) tasks: TaskSet,
    /// The cluster maintenance budget and the NodeMaintenances waiting for it.
    pub(super) fleet: Fleet,
}

impl SupervisorState {
    /// Starts the node actor of `nm`. `fresh`: `nm` comes straight from a watch event (not a
    /// stored copy kept while a crashed actor restarts), so the actor need not re-read it.
    pub(super) async fn spawn(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        nm: Maintenance,
        fresh: bool,
    ) {
        let uid = nm.uid.clone();
        let name = nm.name.clone();
        let node = nm.node_name.clone();
        let actor_name = self
            .config
            .actor_name_prefix
            .as_ref()
            .map(|prefix| format!("{prefix}node/{name}"));
        // A maintenance that ran before (it has a phase) is resumed, typically with all the
        // others after a restart: those start paced, new ones at once.
        let resumed = nm.status.as_ref().is_some_and(|s| s.phase.is_some());
        let start_after = if resumed {
            self.pacer.delay(Instant::now())
        } else {
            Duration::ZERO
        };
        let args = NodeArgs {
            maintenance: nm,
            fresh,
            start_after,
            cluster: self.cluster.clone(),
            config: self.config.clone(),
            evictor: self.evictor.clone(),
        };
        self.drivers.insert(node.clone(), uid.clone());
        match Actor::spawn_linked(actor_name, NodeActor, args, myself.get_cell()).await {
            Ok((actor, _)) => {
                self.by_id.insert(actor.get_id(), uid.clone());
                self.children.insert(
                    uid,
                    Child {
                        actor,
                        name,
                        node,
                        started: Instant::now(),
                    },
                );
            }
            Err(err) => {
                // E.g. the name of a just-crashed actor is not released yet: try again later.
                tracing::warn!(maintenance = %name, error = %err, "cannot start node actor, retrying");
                self.respawn_later(myself, uid);
            }
        }
    }

    /// Starts the actor of `uid` again after a wait that grows with its crashes in a row.
    pub(super) fn respawn_later(&mut self, myself: &ActorRef<SupervisorMsg>, uid: Uid) {
        let delay = self
            .crashes
            .entry(uid.clone())
            .or_default()
            .failed(self.config.respawn_base, self.config.respawn_max);
        let timer = myself.send_after(delay, {
            let uid = uid.clone();
            move || SupervisorMsg::Respawn(uid)
        });
        self.respawns.entry(uid).or_default().set(timer);
    }

    pub(super) async fn upsert(&mut self, myself: &ActorRef<SupervisorMsg>, nm: Maintenance) {
        let uid = nm.uid.clone();
        // Names are unique in the API: one of the same name with another uid is gone, even if
        // its deletion has not been reported yet (a relist reports it after the new one).
        let stale: Vec<Uid> = self
            .known
            .values()
            .filter(|known| known.name == nm.name && known.uid != uid)
            .map(|known| known.uid.clone())
            .collect();
        for gone in stale {
            self.deleted(&gone);
            self.dequeue(&gone);
        }
        // The copy of a maintenance whose actor runs leaves out the pod lists (about 10 KiB
        // in a drain of 30 pods): the actor has them, and an actor restarted after a crash
        // re-reads its maintenance before it writes (see `respawn`).
        let kept = if self.children.contains_key(&uid) {
            nm.without_pod_lists()
        } else {
            nm.clone()
        };
        self.known.insert(uid.clone(), kept);
        if let Some(active) = self.duplicates.get(&uid).map(|d| d.active.clone()) {
            self.duplicate(myself, nm, active);
            return;
        }
        if duplicate_decision::is_marked(&nm) {
            // Marked before a restart: stays out of the node's way for good. (The active one's
            // name is not stored; a marked duplicate never says it again, see
            // `duplicate_decision::decide`, so its `lastError` stands in for it, as before.)
            let active = nm
                .status
                .as_ref()
                .and_then(|s| s.last_error.as_deref())
                .map(MaintenanceName::from)
                .unwrap_or_default();
            self.duplicate(myself, nm, active);
            return;
        }
        if let Some(child) = self.children.get(&uid) {
            let _ = child.actor.cast(NodeMsg::Update(Box::new(nm)));
            // Its phase may have changed what the budget counts (a Failed one frees a slot).
            self.admit(myself).await;
            return;
        }
        if self.queued_changed(myself, &nm).await {
            return;
        }
        if nm.deleting && (!nm.has_finalizer() || self.finished.contains(&uid)) {
            return; // nothing of ours left on it
        }
        let driver = self.drivers.get(&nm.node_name).cloned();
        if driver.as_ref() == Some(&uid) {
            return; // its actor is being restarted
        }
        let Some(driver) = driver else {
            self.start_or_queue(myself, nm).await;
            return;
        };
        let Some(other) = self.known.get(&driver).cloned() else {
            // The node's driver is gone from the API and still undoing: this one starts when
            // that undo is over (see `node_freed`).
            return;
        };
        if decisions::driver([&other, &nm]).map(|d| &d.uid) == Some(&other.uid) {
            self.duplicate(myself, nm, other.name);
            return;
        }
        // Both appeared at once and the younger one was seen first: the older drives. Node
        // changes are the same whoever makes them, so nothing is undone.
        let started = self.children.remove(&other.uid).map(|child| {
            self.superseded.insert(child.actor.get_id());
            child.actor.stop(StopReason::Superseded.text());
        });
        self.respawns.remove(&other.uid);
        let name = nm.name.clone();
        self.duplicate(myself, other, name);
        if started.is_some() {
            // It takes over the younger one's slot in the budget.
            self.spawn(myself, nm, true).await;
        } else {
            self.start_or_queue(myself, nm).await;
        }
    }

    pub(super) fn deleted(&mut self, uid: &Uid) {
        self.known.remove(uid);
        self.duplicates.remove(uid);
        self.finished.remove(uid);
        if let Some(child) = self.children.get(uid) {
            // Gone without our undo having finished (finalizer removed by hand): finish it.
            let _ = child.actor.cast(NodeMsg::Gone);
        }
    }

    pub(super) async fn child_ended(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        id: ActorId,
        reason: Option<String>,
    ) {
        let Some(uid) = self.by_id.remove(&id) else {
            return;
        };
        if self.superseded.remove(&id) {
            return;
        }
        let Some(child) = self.children.remove(&uid) else {
            return;
        };
        match StopReason::parse(reason.as_deref()) {
            Some(done @ (StopReason::Undone | StopReason::Gone)) => {
                // Only while the API still has it: its deletion (which forgets it) is due.
                if done == StopReason::Undone && self.known.contains_key(&uid) {
                    self.finished.insert(uid.clone());
                }
                self.crashes.remove(&uid);
                self.node_freed(myself, &child.node, &uid).await;
            }
            Some(StopReason::Superseded | StopReason::Shutdown) | None => {
                if child.started.elapsed() >= STABLE_RUN {
                    self.crashes.remove(&uid);
                }
                tracing::warn!(maintenance = %child.name, ?reason, "node actor ended unexpectedly, restarting");
                self.respawn_later(myself, uid);
            }
        }
    }

    /// The maintenance `uid` no longer drives `node`: a NodeMaintenance that waited for it
    /// (one deleted and created again under the same name, say) starts now.
    pub(super) async fn node_freed(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        node: &NodeName,
        uid: &Uid,
    ) {
        if self.drivers.get(node) == Some(uid) {
            self.drivers.remove(node);
        }
        let waiting: Vec<&Maintenance> = self
            .known
            .values()
            .filter(|nm| nm.node_name == *node && !self.children.contains_key(&nm.uid))
            .filter(|nm| !self.duplicates.contains_key(&nm.uid))
            .filter(|nm| !(nm.deleting && (!nm.has_finalizer() || self.finished.contains(&nm.uid))))
            .collect();
        if let Some(next) = decisions::driver(waiting).cloned() {
            self.upsert(myself, next).await;
        }
    }

    pub(super) async fn respawn(&mut self, myself: &ActorRef<SupervisorMsg>, uid: Uid) {
        if let Some(mut timer) = self.respawns.remove(&uid) {
            timer.finished();
        }
        if self.children.contains_key(&uid) {
            return;
        }
        match self.known.get(&uid).cloned() {
            // The stored copy may predate the crashed actor's own writes, and has no pod lists:
            // the actor re-reads its maintenance before it writes (`fresh` false).
            Some(nm) => self.spawn(myself, nm, false).await,
            None => {
                self.crashes.remove(&uid);
                let freed: Vec<NodeName> = self
                    .drivers
                    .iter()
                    .filter(|(_, driver)| **driver == uid)
                    .map(|(node, _)| node.clone())
                    .collect();
                for node in freed {
                    self.node_freed(myself, &node, &uid).await;
                }
            }
        }
    }

    /// Starts an orphan sweep (or one more after the one running).
    pub(super) fn sweep(&mut self, myself: &ActorRef<SupervisorMsg>) {
        if !self.sweeps.may_start() {
            return;
        }
        self.sweep_retry.clear();
        let driven: HashSet<NodeName> = self.drivers.keys().cloned().collect();
        let work = sweep::sweep(self.cluster.clone(), self.config.clone(), driven);
        let span = tracing::info_span!(parent: None, "orphan_sweep");
        self.sweeps
            .run(&mut self.tasks, myself, span, work, SupervisorMsg::Swept);
    }

    pub(super) fn swept(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        result: Result<SweepReport, sweep::SweepError>,
    ) {
        self.sweeps.finished();
        let complete = match &result {
            Ok(report) => {
                if !report.restored.is_empty() {
                    tracing::info!(nodes = ?report.restored, "orphaned nodes given back");
                }
                report.failed.is_empty()
            }
            Err(error) => {
                tracing::warn!(%error, "orphan sweep failed");
                false
            }
        };
        if self.sweeps.take_again() {
            self.sweep(myself);
        } else if complete {
            self.sweep_failures.succeeded();
        } else {
            let delay = self.sweep_failures.failed(
                self.config.retry_backoff_base,
                self.config.retry_backoff_max,
            );
            self.sweep_retry
                .set(myself.send_after(delay, || SupervisorMsg::Sweep));
        }
    }
}
