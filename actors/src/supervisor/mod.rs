//! The supervisor: exactly one node actor per NodeMaintenance that drives a node.
//!
//! Fed by the controller (`Upsert` on every watch change, `Deleted` when an object is gone). It
//! restarts a crashed node actor (the restarted actor re-derives everything from the cluster),
//! lets one that finished normally go, and marks a second NodeMaintenance for an already
//! driven node Failed with a reason naming the active one (`duplicate_decision`): such a duplicate
//! never touches the node, and deleting it only removes its finalizer.

mod children;
mod drivers;
mod duplicate_decision;
mod duplicate_tracking;
mod duplicates;
mod fleet_admission;
mod fleet_state;
mod known;
mod messages;
mod orphan_sweeps;
mod respawns;
mod state;

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};

pub use duplicate_decision::DuplicateError;
pub use messages::{Remembered, SupervisorMsg, Wake};
pub use state::SupervisorState;

use crate::config::Config;
use crate::eviction::EvictionMsg;
use crate::ports::Cluster;
use crate::retry::Pacer;
use crate::stop::StopReason;
use crate::task::TaskSet;
use crate::timers::Timers;
use children::Children;
use drivers::Drivers;
use duplicates::Duplicates;
use fleet_state::Fleet;
use known::Known;
use orphan_sweeps::OrphanSweeps;
use respawns::Respawns;

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

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: SupervisorArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let pacer = Pacer::new(args.config.startup_rate_per_sec, args.config.startup_burst);
        let fleet = Fleet::new(args.config.fleet);
        Ok(SupervisorState {
            cluster: args.cluster,
            config: args.config,
            evictor: args.evictor,
            known: Known::default(),
            children: Children::default(),
            drivers: Drivers::default(),
            duplicates: Duplicates::default(),
            respawns: Respawns::default(),
            pacer,
            sweeps: OrphanSweeps::default(),
            tasks: TaskSet::default(),
            fleet,
            timers: Timers::new(myself),
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
        state.timers.cancel_all();
        // Each node actor aborts and awaits its own cluster calls when it stops: once all have
        // stopped, nothing this supervisor started is still going.
        let stopping = state.children.all().map(|child| {
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
        if message.is_from_the_watch() {
            state.config.observer.watch_event_handled();
        }
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
            SupervisorMsg::Wake(Wake::FleetTick) => state.admit(&myself).await,
            SupervisorMsg::Active(port) => {
                let mut names: Vec<String> =
                    state.children.all().map(|c| c.name.to_string()).collect();
                names.sort();
                let _ = port.send(names);
            }
            SupervisorMsg::Remembered(port) => {
                let (known, finished) = state.known.sizes();
                let _ = port.send(Remembered {
                    known,
                    children: state.children.len(),
                    drivers: state.drivers.len(),
                    duplicates: state.duplicates.len(),
                    finished,
                    crashes: state.respawns.crash_counts(),
                });
            }
            SupervisorMsg::Wake(Wake::Respawn(uid)) => state.respawn(&myself, uid).await,
            SupervisorMsg::DuplicateHandled { uid, result } => {
                state.duplicate_handled(&myself, &uid, result);
            }
            SupervisorMsg::Wake(Wake::Sweep) => state.sweep(&myself),
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
