//! What the supervisor knows and does: its node actors by NodeMaintenance uid, the nodes they
//! drive, respawns of crashed actors and the orphan sweep. (The cluster maintenance budget's
//! part of it is in `fleet_state` and `fleet_admission`, the duplicates' in `duplicate_decision` and `duplicate_tracking`.)

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorId, ActorRef};
use tokio::time::Instant;

use super::children::Children;
use super::drivers::Drivers;
use super::duplicate_decision;
use super::duplicates::Duplicates;
use super::fleet_state::Fleet;
use super::known::Known;
use super::messages::SupervisorMsg;
use super::orphan_sweeps::{AfterSweep, OrphanSweeps};
use super::respawns::{Respawns, STABLE_RUN};
use crate::config::Config;
use crate::decisions;
use crate::eviction::EvictionMsg;
use crate::model::{Maintenance, MaintenanceName, NodeName, Uid};
use crate::node::{NodeActor, NodeArgs, NodeMsg};
use crate::ports::Cluster;
use crate::retry::Pacer;
use crate::stop::StopReason;
use crate::sweep::{self, SweepReport};
use crate::task::TaskSet;
use crate::timers::Timers;

/// State of [`super::Supervisor`]. NodeMaintenances are known by uid: one deleted and created again
/// under the same name is another maintenance, which starts once the old one's undo is over.
/// Besides the ports and handles, each field is a component that keeps its own fields private
/// and changes them only in its own file, through methods named for what happened.
pub struct SupervisorState {
    pub(super) cluster: Arc<dyn Cluster>,
    pub(super) config: Arc<Config>,
    pub(super) evictor: ActorRef<EvictionMsg>,
    /// Latest object per NodeMaintenance uid while it exists in the API, and those undone
    /// before their deletion arrived.
    pub(super) known: Known,
    /// Node actors by NodeMaintenance uid, and those stopped on purpose.
    pub(super) children: Children,
    /// Node name -> uid of the NodeMaintenance driving it (kept while its actor restarts and
    /// while it undoes a maintenance already gone from the API).
    pub(super) drivers: Drivers,
    /// NodeMaintenances found to be duplicates, by uid.
    pub(super) duplicates: Duplicates,
    /// Respawns of crashed node actors, and their crashes in a row.
    pub(super) respawns: Respawns,
    /// Spreads the start-up of maintenances resumed at once.
    pub(super) pacer: Pacer,
    /// The orphan sweeps: one run at a time, retried after one that failed.
    pub(super) sweeps: OrphanSweeps,
    /// The cluster work of duplicates and sweeps: aborted and awaited when stopping.
    pub(super) tasks: TaskSet,
    /// The cluster maintenance budget and the NodeMaintenances waiting for it.
    pub(super) fleet: Fleet,
    /// Every timer of the supervisor: the respawns, the sweep's retry, the budget's tick.
    pub(super) timers: Timers<SupervisorMsg>,
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
        // A maintenance that ran before (it carries nmo's finalizer, the first thing its actor
        // writes) is resumed, typically with all the others after a restart: those start paced,
        // new ones at once. A phase alone does not say so: one let in from the queue has
        // `Running` from its queue status, and never started.
        let resumed = nm.has_finalizer();
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
        self.drivers.drives(&node, &uid);
        match Actor::spawn_linked(actor_name, NodeActor, args, myself.get_cell()).await {
            Ok((actor, _)) => self.children.started(uid, actor, name, node),
            Err(err) => {
                // E.g. the name of a just-crashed actor is not released yet: try again later.
                tracing::warn!(maintenance = %name, error = %err, "cannot start node actor, retrying");
                self.respawn_later(uid);
            }
        }
    }

    /// Starts the actor of `uid` again after a wait that grows with its crashes in a row.
    pub(super) fn respawn_later(&mut self, uid: Uid) {
        let (base, max) = (self.config.respawn_base, self.config.respawn_max);
        self.respawns.crashed(&mut self.timers, uid, base, max);
    }

    pub(super) async fn upsert(&mut self, myself: &ActorRef<SupervisorMsg>, nm: Maintenance) {
        // Over 80 lines: the cases of a NodeMaintenance seen, in the order they are decided (a
        // same-name one gone, a duplicate, a running actor, a queued one, a driven node, two at
        // once); the order is the decision, so it stays in one place.
        let uid = nm.uid.clone();
        // Names are unique in the API: one of the same name with another uid is gone, even if
        // its deletion has not been reported yet (a relist reports it after the new one).
        for gone in self.known.replaced_by(&nm) {
            self.deleted(&gone);
            self.dequeue(&gone);
        }
        // The copy of a maintenance whose actor runs leaves out the pod lists (about 10 KiB
        // in a drain of 30 pods): the actor has them, and an actor restarted after a crash
        // re-reads its maintenance before it writes (see `respawn`).
        let kept = if self.children.runs(&uid) {
            nm.without_pod_lists()
        } else {
            nm.clone()
        };
        self.known.seen(uid.clone(), kept);
        if let Some(active) = self.duplicates.active_of(&uid) {
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
        if self.known.nothing_left_on(&nm) {
            return; // nothing of ours left on it
        }
        let driver = self.drivers.of(&nm.node_name).cloned();
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
        let started = self.children.supersede(&other.uid);
        self.respawns.over(&mut self.timers, &other.uid);
        let name = nm.name.clone();
        self.duplicate(myself, other, name);
        if started {
            // It takes over the younger one's slot in the budget.
            self.spawn(myself, nm, true).await;
        } else {
            self.start_or_queue(myself, nm).await;
        }
    }

    pub(super) fn deleted(&mut self, uid: &Uid) {
        self.known.deleted(uid);
        self.duplicates.deleted(uid);
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
        let Some((uid, child)) = self.children.ended(&id) else {
            return;
        };
        match StopReason::parse(reason.as_deref()) {
            Some(done @ (StopReason::Undone | StopReason::Gone)) => {
                // Only while the API still has it: its deletion (which forgets it) is due.
                if done == StopReason::Undone {
                    self.known.undone(&uid);
                }
                self.respawns.forget_crashes(&uid);
                self.node_freed(myself, &child.node, &uid).await;
            }
            Some(StopReason::Superseded | StopReason::Shutdown) | None => {
                if child.started.elapsed() >= STABLE_RUN {
                    self.respawns.forget_crashes(&uid);
                }
                tracing::warn!(maintenance = %child.name, ?reason, "node actor ended unexpectedly, restarting");
                self.respawn_later(uid);
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
        self.drivers.freed(node, uid);
        let waiting: Vec<&Maintenance> = self
            .known
            .all()
            .filter(|nm| nm.node_name == *node && !self.children.runs(&nm.uid))
            .filter(|nm| !self.duplicates.is_duplicate(&nm.uid))
            .filter(|nm| !self.known.nothing_left_on(nm))
            .collect();
        if let Some(next) = decisions::driver(waiting).cloned() {
            self.upsert(myself, next).await;
        }
    }

    pub(super) async fn respawn(&mut self, myself: &ActorRef<SupervisorMsg>, uid: Uid) {
        self.respawns.over(&mut self.timers, &uid);
        if self.children.runs(&uid) {
            return;
        }
        match self.known.get(&uid).cloned() {
            // The stored copy may predate the crashed actor's own writes, and has no pod lists:
            // the actor re-reads its maintenance before it writes (`fresh` false).
            Some(nm) => self.spawn(myself, nm, false).await,
            None => {
                self.respawns.forget_crashes(&uid);
                for node in self.drivers.nodes_of(&uid) {
                    self.node_freed(myself, &node, &uid).await;
                }
            }
        }
    }

    /// Starts an orphan sweep (or one more after the one running).
    pub(super) fn sweep(&mut self, myself: &ActorRef<SupervisorMsg>) {
        if !self.sweeps.asked(&mut self.timers) {
            return;
        }
        let driven = self.drivers.nodes();
        let work = sweep::sweep(self.cluster.clone(), self.config.clone(), driven);
        self.sweeps.run(&mut self.tasks, myself, work);
    }

    /// An orphan sweep ended.
    pub(super) fn swept(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        result: Result<SweepReport, sweep::SweepError>,
    ) {
        if self.sweeps.ended(&mut self.timers, &self.config, &result) == AfterSweep::Again {
            self.sweep(myself);
        }
    }
}
