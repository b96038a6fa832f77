//! The supervisor: exactly one node actor per NodeMaintenance that drives a node.
//!
//! Fed by the controller (`Upsert` on every watch change, `Deleted` when an object is gone). It
//! restarts a crashed node actor (the restarted actor re-derives everything from the cluster),
//! lets one that finished normally go, and marks a second NodeMaintenance for an already
//! driven node Failed with a reason naming the active one (`duplicate`): such a duplicate
//! never touches the node, and deleting it only removes its finalizer.

mod duplicate;
mod fleet;
mod messages;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::time::Instant;

pub use duplicate::DuplicateError;
pub use messages::{Remembered, SupervisorMsg};

use crate::config::Config;
use crate::eviction::EvictionMsg;
use crate::model::Maintenance;
use crate::node::{NodeActor, NodeArgs, NodeMsg};
use crate::op_runner::OpRunner;
use crate::plan;
use crate::ports::Cluster;
use crate::retry::{Backoff, Pacer};
use crate::stop::StopReason;
use crate::sweep::{self, SweepReport};
use crate::task::{TaskSet, TaskSlot};
use duplicate::DuplicateAction;
use fleet::Fleet;

/// A node actor that ran this long before crashing starts its next respawn from the shortest
/// wait again.
const STABLE_RUN: Duration = Duration::from_secs(600);
/// How long a stopping supervisor waits for each node actor to stop.
const CHILD_STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// The supervisor actor.
#[derive(Debug, Clone, Copy, Default)]
pub struct Supervisor;

/// Arguments of [`Supervisor`].
pub struct SupervisorArgs {
    /// The cluster.
    pub cluster: Arc<dyn Cluster>,
    /// Tunables.
    pub config: Arc<Config>,
    /// The eviction actor shared by every node actor.
    pub evictor: ActorRef<EvictionMsg>,
}

struct Child {
    actor: ActorRef<NodeMsg>,
    name: String,
    node: String,
    started: Instant,
}

/// A NodeMaintenance found to be a duplicate.
struct Duplicate {
    /// The NodeMaintenance that drives the node.
    active: String,
    /// The duplicate as last seen.
    latest: Maintenance,
    /// Its cluster calls, one run at a time.
    ops: OpRunner,
}

/// State of [`Supervisor`]. NodeMaintenances are known by uid: one deleted and created again
/// under the same name is another maintenance, which starts once the old one's undo is over.
pub struct SupervisorState {
    cluster: Arc<dyn Cluster>,
    config: Arc<Config>,
    evictor: ActorRef<EvictionMsg>,
    /// Latest object per NodeMaintenance uid, while it exists in the API.
    known: HashMap<String, Maintenance>,
    /// Node actors by NodeMaintenance uid.
    children: HashMap<String, Child>,
    by_id: HashMap<ActorId, String>,
    /// Node name -> uid of the NodeMaintenance driving it (kept while its actor restarts and
    /// while it undoes a maintenance already gone from the API).
    drivers: HashMap<String, String>,
    /// Node actors stopped on purpose (their termination needs no reaction).
    superseded: HashSet<ActorId>,
    /// NodeMaintenances found to be duplicates, by uid.
    duplicates: HashMap<String, Duplicate>,
    /// NodeMaintenances whose undo finished while the API still had them (their last update
    /// may still arrive); forgotten when the deletion arrives.
    finished: HashSet<String>,
    /// Pending respawns, by uid.
    respawns: HashMap<String, TaskSlot>,
    /// Crashes in a row, by uid: each respawn waits longer.
    crashes: HashMap<String, Backoff>,
    /// Spreads the start-up of maintenances resumed at once.
    pacer: Pacer,
    /// The orphan sweep, one run at a time.
    sweeps: OpRunner,
    /// A sweep retry after a failed one.
    sweep_retry: TaskSlot,
    sweep_failures: Backoff,
    /// The cluster work of duplicates and sweeps: aborted and awaited when stopping.
    tasks: TaskSet,
    /// The cluster maintenance budget and the NodeMaintenances waiting for it.
    fleet: Fleet,
}

impl SupervisorState {
    /// Starts the node actor of `nm`. `fresh`: `nm` comes straight from a watch event (not a
    /// stored copy kept while a crashed actor restarts), so the actor need not re-read it.
    async fn spawn(&mut self, myself: &ActorRef<SupervisorMsg>, nm: Maintenance, fresh: bool) {
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
    fn respawn_later(&mut self, myself: &ActorRef<SupervisorMsg>, uid: String) {
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

    /// `nm` is a duplicate of `active`: mark it Failed, or release its finalizer when deleted.
    fn duplicate(&mut self, myself: &ActorRef<SupervisorMsg>, nm: Maintenance, active: String) {
        let uid = nm.uid.clone();
        // A duplicate never drives its node, so it never waits for the budget either.
        self.dequeue(&uid);
        let duplicate = self
            .duplicates
            .entry(uid.clone())
            .or_insert_with(|| Duplicate {
                active: active.clone(),
                latest: nm.clone(),
                ops: OpRunner::default(),
            });
        duplicate.active = active;
        duplicate.latest = nm;
        if duplicate.ops.may_start() {
            self.handle_duplicate(myself, &uid);
        }
    }

    /// Runs what a duplicate calls for, if anything.
    fn handle_duplicate(&mut self, myself: &ActorRef<SupervisorMsg>, uid: &str) {
        let now = self.config.now();
        let Some(duplicate) = self.duplicates.get_mut(uid) else {
            return;
        };
        let action = duplicate::decide(&duplicate.latest, &duplicate.active, now);
        if action == DuplicateAction::Nothing {
            return;
        }
        let work = duplicate::carry_out(self.cluster.clone(), duplicate.latest.clone(), action);
        let uid = uid.to_string();
        duplicate.ops.run(
            &mut self.tasks,
            myself,
            tracing::Span::none(),
            work,
            move |result| SupervisorMsg::DuplicateHandled { uid, result },
        );
    }

    fn duplicate_handled(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        uid: &str,
        result: Result<(), DuplicateError>,
    ) {
        let Some(duplicate) = self.duplicates.get_mut(uid) else {
            return; // deleted meanwhile
        };
        if let Err(err) = result {
            tracing::warn!(maintenance = %duplicate.latest.name, error = %err, "cannot handle duplicate NodeMaintenance");
        }
        duplicate.ops.finished();
        if duplicate.ops.take_again() {
            self.handle_duplicate(myself, uid);
        }
    }

    async fn upsert(&mut self, myself: &ActorRef<SupervisorMsg>, nm: Maintenance) {
        let uid = nm.uid.clone();
        // Names are unique in the API: one of the same name with another uid is gone, even if
        // its deletion has not been reported yet (a relist reports it after the new one).
        let stale: Vec<String> = self
            .known
            .values()
            .filter(|known| known.name == nm.name && known.uid != uid)
            .map(|known| known.uid.clone())
            .collect();
        for gone in stale {
            self.deleted(&gone);
            self.dequeue(&gone);
        }
        self.known.insert(uid.clone(), nm.clone());
        if let Some(active) = self.duplicates.get(&uid).map(|d| d.active.clone()) {
            self.duplicate(myself, nm, active);
            return;
        }
        if duplicate::is_marked(&nm) {
            // Marked before a restart: stays out of the node's way for good.
            let active = nm
                .status
                .as_ref()
                .and_then(|s| s.last_error.clone())
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
        if plan::driver([&other, &nm]).map(|d| &d.uid) == Some(&other.uid) {
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

    fn deleted(&mut self, uid: &str) {
        self.known.remove(uid);
        self.duplicates.remove(uid);
        self.finished.remove(uid);
        if let Some(child) = self.children.get(uid) {
            // Gone without our undo having finished (finalizer removed by hand): finish it.
            let _ = child.actor.cast(NodeMsg::Gone);
        }
    }

    async fn child_ended(
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
    async fn node_freed(&mut self, myself: &ActorRef<SupervisorMsg>, node: &str, uid: &str) {
        if self.drivers.get(node).map(String::as_str) == Some(uid) {
            self.drivers.remove(node);
        }
        let waiting: Vec<&Maintenance> = self
            .known
            .values()
            .filter(|nm| nm.node_name == node && !self.children.contains_key(&nm.uid))
            .filter(|nm| !self.duplicates.contains_key(&nm.uid))
            .filter(|nm| !(nm.deleting && (!nm.has_finalizer() || self.finished.contains(&nm.uid))))
            .collect();
        if let Some(next) = plan::driver(waiting).cloned() {
            self.upsert(myself, next).await;
        }
    }

    async fn respawn(&mut self, myself: &ActorRef<SupervisorMsg>, uid: String) {
        if let Some(mut timer) = self.respawns.remove(&uid) {
            timer.finished();
        }
        if self.children.contains_key(&uid) {
            return;
        }
        match self.known.get(&uid).cloned() {
            // The stored copy may predate the crashed actor's own writes.
            Some(nm) => self.spawn(myself, nm, false).await,
            None => {
                self.crashes.remove(&uid);
                let freed: Vec<String> = self
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
    fn sweep(&mut self, myself: &ActorRef<SupervisorMsg>) {
        if !self.sweeps.may_start() {
            return;
        }
        self.sweep_retry.clear();
        let driven: HashSet<String> = self.drivers.keys().cloned().collect();
        let work = sweep::sweep(self.cluster.clone(), self.config.clone(), driven);
        let span = tracing::info_span!(parent: None, "orphan_sweep");
        self.sweeps
            .run(&mut self.tasks, myself, span, work, SupervisorMsg::Swept);
    }

    fn swept(
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

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: SupervisorArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let pacer = Pacer::new(args.config.startup_rate_per_sec, args.config.startup_burst);
        let fleet = Fleet::new(args.config.fleet);
        Ok(SupervisorState {
            cluster: args.cluster,
            config: args.config,
            evictor: args.evictor,
            known: HashMap::new(),
            children: HashMap::new(),
            by_id: HashMap::new(),
            drivers: HashMap::new(),
            superseded: HashSet::new(),
            duplicates: HashMap::new(),
            finished: HashSet::new(),
            respawns: HashMap::new(),
            crashes: HashMap::new(),
            pacer,
            sweeps: OpRunner::default(),
            sweep_retry: TaskSlot::default(),
            sweep_failures: Backoff::default(),
            tasks: TaskSet::default(),
            fleet,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.start_fleet(&myself);
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.respawns.clear();
        state.sweep_retry.clear();
        // Each node actor aborts and awaits its own cluster calls when it stops: once all have
        // stopped, nothing this supervisor started is still going.
        let stopping = state.children.values().map(|child| {
            child
                .actor
                .stop_and_wait(StopReason::Shutdown.text(), Some(CHILD_STOP_TIMEOUT))
        });
        for stopped in futures::future::join_all(stopping).await {
            if let Err(err) = stopped {
                tracing::warn!(error = %err, "node actor did not stop cleanly");
            }
        }
        state.tasks.cancel_all().await;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SupervisorMsg::Upsert(nm) => state.upsert(&myself, *nm).await,
            SupervisorMsg::Deleted { uid, .. } => {
                state.deleted(&uid);
                state.dequeue(&uid);
                state.admit(&myself).await;
            }
            SupervisorMsg::Listed => {
                state.listed(&myself).await;
                // Every NodeMaintenance is known: look for nodes left by ones that are gone.
                state.sweep(&myself);
            }
            SupervisorMsg::Queue(port) => {
                let _ = port.send(state.fleet.queue_order());
            }
            SupervisorMsg::Nodes(event) => state.nodes_changed(&myself, event).await,
            SupervisorMsg::QueueWritten { uid, result } => {
                state.queue_written(&myself, &uid, result).await;
            }
            SupervisorMsg::FleetTick => state.admit(&myself).await,
            SupervisorMsg::Active(port) => {
                let mut names: Vec<String> =
                    state.children.values().map(|c| c.name.clone()).collect();
                names.sort();
                let _ = port.send(names);
            }
            SupervisorMsg::Remembered(port) => {
                let _ = port.send(Remembered {
                    known: state.known.len(),
                    children: state.children.len(),
                    drivers: state.drivers.len(),
                    duplicates: state.duplicates.len(),
                    finished: state.finished.len(),
                    crashes: state.crashes.len(),
                });
            }
            SupervisorMsg::Respawn(uid) => state.respawn(&myself, uid).await,
            SupervisorMsg::DuplicateHandled { uid, result } => {
                state.duplicate_handled(&myself, &uid, result);
            }
            SupervisorMsg::Sweep => state.sweep(&myself),
            SupervisorMsg::Swept(result) => state.swept(&myself, result),
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Never stop with a child: node actors end normally when their maintenance is undone,
        // and a crashed one is restarted.
        match event {
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                state.child_ended(&myself, cell.get_id(), reason).await;
                // An undone maintenance frees its slot in the budget.
                state.admit(&myself).await;
            }
            SupervisionEvent::ActorFailed(cell, err) => {
                tracing::error!(actor = ?cell.get_name(), error = %err, "node actor crashed");
                state
                    .child_ended(&myself, cell.get_id(), Some(format!("crashed: {err}")))
                    .await;
            }
            _ => {}
        }
        Ok(())
    }
}
