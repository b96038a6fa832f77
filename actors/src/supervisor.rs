//! The supervisor: exactly one node actor per NodeMaintenance that drives a node.
//!
//! Fed by the controller (`Upsert` on every watch change, `Deleted` when an object is gone). It
//! restarts a crashed node actor (the restarted actor re-derives everything from the cluster),
//! lets one that finished normally go, and marks a second NodeMaintenance for an already
//! driven node Failed with a reason naming the active one: such a duplicate never touches the
//! node, and deleting it only removes its finalizer.

mod messages;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::eviction::EvictionMsg;
use crate::model::{Event, EventTarget, EventType, Maintenance, Phase, conditions, reasons};
use crate::node::{NodeActor, NodeArgs, NodeMsg, STOP_GONE, STOP_UNDONE};
use crate::plan;
use crate::ports::Cluster;

pub use messages::SupervisorMsg;

/// Delay before a crashed node actor is started again (no hot crash loop).
const RESPAWN_DELAY: Duration = Duration::from_secs(1);
/// Stop reason of a node actor replaced by an older NodeMaintenance for the same node.
const STOP_SUPERSEDED: &str = "superseded";

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
    /// NodeMaintenances found to be duplicates -> the active one.
    duplicates: HashMap<String, String>,
    /// NodeMaintenances whose undo finished (their last update may still arrive).
    finished: HashSet<String>,
    timers: Vec<JoinHandle<()>>,
}

fn is_marked_duplicate(nm: &Maintenance) -> bool {
    nm.status.as_ref().is_some_and(|s| {
        s.phase == Some(Phase::Failed)
            && plan::condition(s, conditions::DUPLICATE).is_some_and(|c| c.status == "True")
    })
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
        self.timers.retain(|t| !t.is_finished());
        let actor = myself.clone();
        self.timers.push(tokio::spawn(async move {
            tokio::time::sleep(RESPAWN_DELAY).await;
            let _ = actor.cast(SupervisorMsg::Respawn(name));
        }));
    }

    /// Sets a duplicate Failed (naming the active one), or releases its finalizer when deleted.
    fn handle_duplicate(&self, nm: &Maintenance, active: &str) {
        let cluster = self.cluster.clone();
        let now = self.config.now();
        let nm = nm.clone();
        let active = active.to_string();
        tokio::spawn(async move {
            if nm.deleting {
                if nm.has_finalizer()
                    && let Err(err) = cluster.remove_finalizer(&nm.name).await
                {
                    tracing::warn!(maintenance = %nm.name, error = %err, "cannot remove finalizer");
                }
                return;
            }
            if is_marked_duplicate(&nm) {
                return;
            }
            if !nm.has_finalizer()
                && let Err(err) = cluster.add_finalizer(&nm.name, &nm.finalizers).await
            {
                tracing::warn!(maintenance = %nm.name, error = %err, "cannot add finalizer");
                return;
            }
            let error = format!(
                "NodeMaintenance {active} already drives node {}; this one is ignored",
                nm.node_name
            );
            let mut status = nm.status.clone().unwrap_or_default();
            status.phase = Some(Phase::Failed);
            status.last_error = Some(error.clone());
            status.last_update = Some(now);
            plan::set_condition(
                &mut status.conditions,
                conditions::DUPLICATE,
                true,
                conditions::DUPLICATE,
                &error,
                now,
            );
            if let Err(err) = cluster.write_status(&nm.name, &status).await {
                tracing::warn!(maintenance = %nm.name, error = %err, "cannot mark duplicate");
                return;
            }
            let event = Event {
                target: EventTarget::Maintenance {
                    name: nm.name.clone(),
                    uid: nm.uid.clone(),
                },
                type_: EventType::Warning,
                reason: reasons::FAILED.to_string(),
                message: error,
            };
            if let Err(err) = cluster.emit_event(&event).await {
                tracing::warn!(maintenance = %nm.name, error = %err, "cannot emit event");
            }
        });
    }

    async fn upsert(&mut self, myself: &ActorRef<SupervisorMsg>, nm: Maintenance) {
        let name = nm.name.clone();
        self.known.insert(name.clone(), nm.clone());
        if let Some(active) = self.duplicates.get(&name) {
            self.handle_duplicate(&nm, active);
            return;
        }
        if is_marked_duplicate(&nm) {
            // Marked before a restart: stays out of the node's way for good.
            let active = nm
                .status
                .as_ref()
                .and_then(|s| s.last_error.clone())
                .unwrap_or_default();
            self.duplicates.insert(name, active.clone());
            self.handle_duplicate(&nm, &active);
            return;
        }
        if let Some(child) = self.children.get(&name) {
            let _ = child.actor.cast(NodeMsg::Update(Box::new(nm)));
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
                self.duplicates.insert(name, other.name.clone());
                self.handle_duplicate(&nm, &other.name);
            }
            Some(other) => {
                // Both appeared at once and the younger one was seen first: the older drives.
                // Node changes are the same whoever makes them, so nothing is undone.
                if let Some(child) = self.children.remove(&other.name) {
                    self.superseded.insert(child.actor.get_id());
                    child.actor.stop(Some(STOP_SUPERSEDED.to_string()));
                }
                self.duplicates.insert(other.name.clone(), name.clone());
                self.handle_duplicate(&other, &name);
                self.spawn(myself, nm, true).await;
            }
            None => self.spawn(myself, nm, true).await,
        }
    }

    fn deleted(&mut self, name: &str) {
        self.known.remove(name);
        self.duplicates.remove(name);
        self.finished.remove(name);
        if let Some(child) = self.children.get(name) {
            // Gone without our undo having finished (finalizer removed by hand): finish it.
            let gone = Maintenance {
                name: name.to_string(),
                uid: String::new(),
                resource_version: String::new(),
                node_name: child.node.clone(),
                reason: String::new(),
                creation_timestamp: self.config.now(),
                deleting: true,
                finalizers: Vec::new(),
                status: None,
            };
            let _ = child.actor.cast(NodeMsg::Update(Box::new(gone)));
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
        match reason.as_deref() {
            Some(STOP_UNDONE) | Some(STOP_GONE) => {
                if reason.as_deref() == Some(STOP_UNDONE) {
                    self.finished.insert(name.clone());
                }
                if let Some(node) = node
                    && self.drivers.get(&node) == Some(&name)
                {
                    self.drivers.remove(&node);
                }
            }
            _ => {
                tracing::warn!(maintenance = %name, ?reason, "node actor ended unexpectedly, restarting");
                self.respawn_later(myself, name);
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
            timers: Vec::new(),
        })
    }

    async fn post_stop(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        for timer in state.timers.drain(..) {
            timer.abort();
        }
        myself.stop_children(Some("shutdown".to_string()));
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
            SupervisorMsg::Deleted { name } => state.deleted(&name),
            SupervisorMsg::Active(port) => {
                let mut names: Vec<String> = state.children.keys().cloned().collect();
                names.sort();
                let _ = port.send(names);
            }
            SupervisorMsg::Respawn(name) => {
                if state.children.contains_key(&name) {
                    return Ok(());
                }
                match state.known.get(&name).cloned() {
                    // The stored copy may predate the crashed actor's own writes.
                    Some(nm) => state.spawn(&myself, nm, false).await,
                    None => {
                        state.drivers.retain(|_, driver| *driver != name);
                    }
                }
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
