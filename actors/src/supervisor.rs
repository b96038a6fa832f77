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

pub use duplicate::DuplicateError;
pub use messages::SupervisorMsg;

use crate::config::Config;
use crate::eviction::EvictionMsg;
use crate::model::Maintenance;
use crate::node::{NodeActor, NodeArgs, NodeMsg};
use crate::op_runner::OpRunner;
use crate::plan;
use crate::ports::Cluster;
use crate::stop::StopReason;
use crate::task::TaskSlot;
use duplicate::DuplicateAction;
use fleet::Fleet;

/// Delay before a crashed node actor is started again (no hot crash loop).
const RESPAWN_DELAY: Duration = Duration::from_secs(1);

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
    node: String,
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

/// State of [`Supervisor`].
pub struct SupervisorState {
    cluster: Arc<dyn Cluster>,
    config: Arc<Config>,
    evictor: ActorRef<EvictionMsg>,
    /// Latest object per NodeMaintenance name.
    known: HashMap<String, Maintenance>,
    children: HashMap<String, Child>,
    by_id: HashMap<ActorId, String>,
    /// Node name -> the NodeMaintenance driving it (kept while its actor restarts).
    drivers: HashMap<String, String>,
    /// Node actors stopped on purpose (their termination needs no reaction).
    superseded: HashSet<ActorId>,
    /// NodeMaintenances found to be duplicates.
    duplicates: HashMap<String, Duplicate>,
    /// NodeMaintenances whose undo finished (their last update may still arrive).
    finished: HashSet<String>,
    /// Pending respawns, by NodeMaintenance name.
    respawns: HashMap<String, TaskSlot>,
    /// The cluster maintenance budget and the NodeMaintenances waiting for it.
    fleet: Fleet,
}

impl SupervisorState {
    /// Starts the node actor of `nm`. `fresh`: `nm` comes straight from a watch event (not a
    /// stored copy kept while a crashed actor restarts), so the actor need not re-read it.
    async fn spawn(&mut self, myself: &ActorRef<SupervisorMsg>, nm: Maintenance, fresh: bool) {
        let name = nm.name.clone();
        let node = nm.node_name.clone();
        let actor_name = self
            .config
            .actor_name_prefix
            .as_ref()
            .map(|prefix| format!("{prefix}node/{name}"));
        let args = NodeArgs {
            maintenance: nm,
            fresh,
            cluster: self.cluster.clone(),
            config: self.config.clone(),
            evictor: self.evictor.clone(),
        };
        match Actor::spawn_linked(actor_name, NodeActor, args, myself.get_cell()).await {
            Ok((actor, _)) => {
                self.by_id.insert(actor.get_id(), name.clone());
                self.drivers.insert(node.clone(), name.clone());
                self.children.insert(name, Child { actor, node });
            }
            Err(err) => {
                // E.g. the name of a just-crashed actor is not released yet: try again later.
                tracing::warn!(maintenance = %name, error = %err, "cannot start node actor, retrying");
                self.drivers.insert(node, name.clone());
                self.respawn_later(myself, name);
            }
        }
    }

    fn respawn_later(&mut self, myself: &ActorRef<SupervisorMsg>, name: String) {
        let timer = myself.send_after(RESPAWN_DELAY, {
            let name = name.clone();
            move || SupervisorMsg::Respawn(name)
        });
        self.respawns.entry(name).or_default().set(timer);
    }

    /// `nm` is a duplicate of `active`: mark it Failed, or release its finalizer when deleted.
    fn duplicate(&mut self, myself: &ActorRef<SupervisorMsg>, nm: Maintenance, active: String) {
        let name = nm.name.clone();
        // A duplicate never drives its node, so it never waits for the budget either.
        self.dequeue(&name);
        let duplicate = self
            .duplicates
            .entry(name.clone())
            .or_insert_with(|| Duplicate {
                active: active.clone(),
                latest: nm.clone(),
                ops: OpRunner::default(),
            });
        duplicate.active = active;
        duplicate.latest = nm;
        if duplicate.ops.may_start() {
            self.handle_duplicate(myself, &name);
        }
    }

    /// Runs what a duplicate calls for, if anything.
    fn handle_duplicate(&mut self, myself: &ActorRef<SupervisorMsg>, name: &str) {
        let now = self.config.now();
        let Some(duplicate) = self.duplicates.get_mut(name) else {
            return;
        };
        let action = duplicate::decide(&duplicate.latest, &duplicate.active, now);
        if action == DuplicateAction::Nothing {
            return;
        }
        let work = duplicate::carry_out(self.cluster.clone(), duplicate.latest.clone(), action);
        let name = name.to_string();
        duplicate
            .ops
            .run(myself, tracing::Span::none(), work, move |result| {
                SupervisorMsg::DuplicateHandled { name, result }
            });
    }

    fn duplicate_handled(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        name: &str,
        result: Result<(), DuplicateError>,
    ) {
        if let Err(err) = result {
            tracing::warn!(maintenance = %name, error = %err, "cannot handle duplicate NodeMaintenance");
        }
        let Some(duplicate) = self.duplicates.get_mut(name) else {
            return; // deleted meanwhile
        };
        duplicate.ops.finished();
        if duplicate.ops.take_again() {
            self.handle_duplicate(myself, name);
        }
    }

    async fn upsert(&mut self, myself: &ActorRef<SupervisorMsg>, nm: Maintenance) {
        let name = nm.name.clone();
        self.known.insert(name.clone(), nm.clone());
        if let Some(active) = self.duplicates.get(&name).map(|d| d.active.clone()) {
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
        if let Some(child) = self.children.get(&name) {
            let _ = child.actor.cast(NodeMsg::Update(Box::new(nm)));
            // Its phase may have changed what the budget counts (a Failed one frees a slot).
            self.admit(myself).await;
            return;
        }
        if self.queued_changed(myself, &nm).await {
            return;
        }
        if nm.deleting && (!nm.has_finalizer() || self.finished.contains(&name)) {
            return; // nothing of ours left on it
        }
        if self.drivers.get(&nm.node_name) == Some(&name) {
            return; // its actor is being restarted
        }
        let other = self
            .drivers
            .get(&nm.node_name)
            .and_then(|other| self.known.get(other))
            .cloned();
        match other {
            Some(other) if plan::driver([&other, &nm]).map(|d| &d.name) == Some(&other.name) => {
                self.duplicate(myself, nm, other.name);
            }
            Some(other) => {
                // Both appeared at once and the younger one was seen first: the older drives.
                // Node changes are the same whoever makes them, so nothing is undone.
                let started = self.children.remove(&other.name).map(|child| {
                    self.superseded.insert(child.actor.get_id());
                    child.actor.stop(StopReason::Superseded.text());
                });
                self.duplicate(myself, other, name);
                if started.is_some() {
                    // It takes over the younger one's slot in the budget.
                    self.spawn(myself, nm, true).await;
                } else {
                    self.start_or_queue(myself, nm).await;
                }
            }
            None => self.start_or_queue(myself, nm).await,
        }
    }

    fn deleted(&mut self, name: &str) {
        self.known.remove(name);
        self.duplicates.remove(name);
        self.finished.remove(name);
        if let Some(child) = self.children.get(name) {
            // Gone without our undo having finished (finalizer removed by hand): finish it.
            let _ = child.actor.cast(NodeMsg::Gone);
        }
    }

    fn child_ended(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        id: ActorId,
        reason: Option<String>,
    ) {
        let Some(name) = self.by_id.remove(&id) else {
            return;
        };
        if self.superseded.remove(&id) {
            return;
        }
        let node = self.children.remove(&name).map(|c| c.node);
        match StopReason::parse(reason.as_deref()) {
            Some(done @ (StopReason::Undone | StopReason::Gone)) => {
                if done == StopReason::Undone {
                    self.finished.insert(name.clone());
                }
                if let Some(node) = node
                    && self.drivers.get(&node) == Some(&name)
                {
                    self.drivers.remove(&node);
                }
            }
            Some(StopReason::Superseded | StopReason::Shutdown) | None => {
                tracing::warn!(maintenance = %name, ?reason, "node actor ended unexpectedly, restarting");
                self.respawn_later(myself, name);
            }
        }
    }

    async fn respawn(&mut self, myself: &ActorRef<SupervisorMsg>, name: String) {
        if let Some(timer) = self.respawns.get_mut(&name) {
            timer.finished();
        }
        self.respawns.remove(&name);
        if self.children.contains_key(&name) {
            return;
        }
        match self.known.get(&name).cloned() {
            // The stored copy may predate the crashed actor's own writes.
            Some(nm) => self.spawn(myself, nm, false).await,
            None => {
                self.drivers.retain(|_, driver| *driver != name);
            }
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
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.respawns.clear();
        myself.stop_children(StopReason::Shutdown.text());
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
            SupervisorMsg::Deleted { name } => {
                state.deleted(&name);
                state.dequeue(&name);
                state.admit(&myself).await;
            }
            SupervisorMsg::Listed => state.listed(&myself).await,
            SupervisorMsg::Queue(port) => {
                let _ = port.send(state.fleet.queue_order());
            }
            SupervisorMsg::Nodes(event) => state.nodes_changed(&myself, event).await,
            SupervisorMsg::QueueWritten { name, result } => {
                state.queue_written(&myself, &name, result).await;
            }
            SupervisorMsg::FleetTick => state.admit(&myself).await,
            SupervisorMsg::Active(port) => {
                let mut names: Vec<String> = state.children.keys().cloned().collect();
                names.sort();
                let _ = port.send(names);
            }
            SupervisorMsg::Respawn(name) => state.respawn(&myself, name).await,
            SupervisorMsg::DuplicateHandled { name, result } => {
                state.duplicate_handled(&myself, &name, result);
            }
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
                state.child_ended(&myself, cell.get_id(), reason);
                // An undone maintenance frees its slot in the budget.
                state.admit(&myself).await;
            }
            SupervisionEvent::ActorFailed(cell, err) => {
                tracing::error!(actor = ?cell.get_name(), error = %err, "node actor crashed");
                state.child_ended(&myself, cell.get_id(), Some(format!("crashed: {err}")));
            }
            _ => {}
        }
        Ok(())
    }
}
