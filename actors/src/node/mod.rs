//! The node actor: one maintenance, from finalizer to undo.
//!
//! Where a maintenance stands is one enum, `stage::Stage`: `Starting`, `WaitingForLease`
//! (who holds it, until when), `Draining` (the drain's own state), `Succeeded`, `Failed` (why,
//! and whether an undo is due) and `Undoing`. Each concern is a small type of its own: the
//! drain (`drain`), the status writer (`status_writer`), the single-flight op runner
//! (`crate::op_runner`, shared with the supervisor), the lease keeper (`lease_keeper`), the
//! watches (`watches`), the timers (`timers`: one table, each kind of wake-up pending at
//! most once, every one a `NodeMsg::Wake`), the copy of the NodeMaintenance
//! (`maintenance_copy`), the failing steps' backoff (`step_retry`), the reconciles'
//! bookkeeping (`reconciles`), the traces (`trace`) and the line to the eviction actor
//! (`eviction_link`). Each keeps its fields private, so what changes them is in its own file;
//! the actor's state is the stage and these components (`state`). The actor decides with pure functions (`decide`,
//! `status`, `pending`), then acts (`transitions` through `state`); cluster work runs in tasks
//! (`ops`) whose results come back as messages, so a slow API or a PDB-blocked drain never
//! stalls the mailbox (deletion included).
//!
//! Under faults: the first change to the node writes nmo's record of what was there before in
//! the same patch, and the undo restores exactly that (`crate::decisions::maintenance_patch`,
//! `crate::decisions::undo_patch`); every cluster call has a deadline (`crate::call_deadline`); every
//! task the actor starts is aborted and awaited when it stops (`crate::task::TaskSet`), so
//! nothing it began can land after a leader handover; a failing step waits out a growing
//! backoff (`step_retry`); the lease keeper retries a failed renewal
//! within seconds and pauses evictions while the lease is about to lapse (`lease_keeper`); a give-up
//! is written as Failed with the undo due before the undo runs (`decide::Facts`).

mod blocked;
mod daemonset_answers;
mod decide;
mod drain;
mod drain_deadline;
mod drain_policy;
mod errors;
mod eviction_link;
mod lease_keeper;
mod lease_transitions;
mod maintenance_copy;
mod messages;
mod observed;
pub(crate) mod ops;
mod pending;
mod reasons;
mod reconciles;
mod seen;
mod stage;
mod state;
mod status;
mod status_writer;
mod step_retry;
mod trace;
mod transitions;
mod watches;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use ractor::{Actor, ActorProcessingErr, ActorRef};

pub use errors::{DrainError, LeaseError, LeaseLost, ReconcileError, ReleaseError, UndoError};
pub use messages::{NodeMsg, Wake, WatchKind};
pub use ops::{DaemonSets, DrainPass, OpResult, ReconcileOutcome, Reconciled};
pub use state::NodeActorState;
pub use status::InitialCounts;

use crate::config::Config;
use crate::eviction::EvictionMsg;
use crate::model::{Maintenance, Phase};
use crate::observe::{BlockedReport, MaintenanceIdentity, OpOutcome, PhaseReport};
use crate::op_runner::OpRunner;
use crate::ports::Cluster;
use crate::task::TaskSet;
use crate::timers::Timers;
use eviction_link::EvictionLink;
use lease_keeper::LeaseKeeper;
use maintenance_copy::MaintenanceCopy;
use ops::OpCtx;
use reconciles::Reconciles;
use stage::Stage;
use status_writer::StatusWriter;
use step_retry::StepRetry;
use trace::TraceState;
use watches::Watches;

/// The node actor.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeActor;

/// Arguments of [`NodeActor`].
pub struct NodeArgs {
    /// The NodeMaintenance as last seen.
    pub maintenance: Maintenance,
    /// `maintenance` was just delivered by the watch: the first reconcile skips re-reading it.
    /// False for a restart from a stored copy, which may predate the crashed actor's writes.
    pub fresh: bool,
    /// How long to wait before the first step (start-ups of many resumed maintenances are
    /// spread out); a deletion does not wait.
    pub start_after: std::time::Duration,
    /// The cluster.
    pub cluster: Arc<dyn Cluster>,
    /// Tunables.
    pub config: Arc<Config>,
    /// The eviction actor.
    pub evictor: ActorRef<EvictionMsg>,
}

impl Actor for NodeActor {
    type Msg = NodeMsg;
    type State = NodeActorState;
    type Arguments = NodeArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: NodeArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let nm = args.maintenance;
        let span = trace::maintenance_root(&nm.name, &nm.node_name, &nm.reason);
        args.config.observer.trace_root(&span);
        let anchor = args.config.observer.trace_anchor(&span);
        let trace = TraceState::started(span, anchor);
        let observed_phase =
            PhaseReport::new(args.config.observer.clone()).naming(MaintenanceIdentity {
                name: nm.name.to_string(),
                node: nm.node_name.to_string(),
                created: nm.creation_timestamp,
            });
        let blocked_report = BlockedReport::new(
            args.config.observer.clone(),
            nm.name.to_string(),
            nm.node_name.to_string(),
        );
        let progress_pace = args.config.progress_pace.slot();
        let ctx = OpCtx {
            cluster: args.cluster,
            config: args.config,
            nm_name: nm.name.clone(),
            nm_uid: nm.uid.clone(),
            node_name: nm.node_name.clone(),
            deleting: Arc::new(AtomicBool::new(false)),
        };
        let lease = LeaseKeeper::resumed(nm.status.as_ref().is_some_and(status::lease_was_held));
        Ok(NodeActorState {
            ctx,
            evictions: EvictionLink::new(args.evictor, myself.get_derived(), nm.name.clone()),
            status: StatusWriter::new(nm.status.clone()),
            progress_pace,
            nm: MaintenanceCopy::new(nm, args.fresh),
            stage: Stage::Starting,
            ops: OpRunner::default(),
            tasks: TaskSet::default(),
            retry: StepRetry::start_after(args.start_after),
            reconciles: Reconciles::default(),
            lease,
            watches: Watches::default(),
            daemonsets: DaemonSets::default(),
            timers: Timers::new(myself.clone()),
            trace,
            observed_phase,
            blocked_report,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state
            .timers
            .every(Wake::Tick, state.ctx.config.retry_interval);
        if state.nm.seen().deleting {
            // Undo is decided from the cluster too, but a deletion needs no re-read first.
            state.nm.needs_no_reread();
            state.start_undo(&myself);
        } else if state.must_not_start() {
            // Nothing is read or watched for it (`nodeName: ""` would watch every
            // unscheduled pod of the cluster).
            state.fail_invalid_spec(&myself);
        } else if state.nm.fresh() && state.status.wanted().phase == Some(Phase::Failed) {
            // Fresh from the watch and already Failed: stays Failed, as after a re-read (and
            // undoes, if the give-up's undo was still due).
            state.enter_recorded_failure(&myself);
            state.kick(&myself);
        } else if !state.retry.wait_for_start(&mut state.timers) {
            // Unless a resumed maintenance waits its turn to start.
            state.kick(&myself);
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if state.ops.running() {
            let took = state.ops.finished();
            state
                .ctx
                .config
                .observer
                .operation_finished(took, OpOutcome::Abandoned);
        }
        state.lease.stop_renewing(&mut state.timers);
        // Every timer, the drain deadline's and the watches' re-subscriptions included.
        state.timers.cancel_all();
        state.watches.stop_node();
        state.watches.stop_pods();
        state.watches.stop_lease();
        state.evictions.cancel_all();
        state.forget_phase();
        // Nothing this actor started may reach the API server once it is gone.
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
            NodeMsg::Update(nm) => state.on_update(&myself, *nm),
            NodeMsg::Gone => state.on_gone(&myself),
            NodeMsg::Wake(wake) => state.on_wake(&myself, wake),
            NodeMsg::LeaseRenewed(result) => state.on_renewed(&myself, result),
            NodeMsg::NodeChanged(node) => state.on_node_changed(&myself, node),
            NodeMsg::PodsChanged(pods) => state.on_pods_changed(&myself, pods),
            NodeMsg::LeaseChanged(lease) => state.on_lease_seen(&myself, lease),
            NodeMsg::VmsChanged(vms) => state.on_vms_changed(&myself, vms),
            NodeMsg::WatchEnded(kind) => state.on_watch_ended(kind),
            NodeMsg::Op(result) => {
                let took = state.ops.finished();
                state
                    .ctx
                    .config
                    .observer
                    .operation_finished(took, result.outcome());
                match result {
                    OpResult::Reconciled(done) => state.on_reconciled(&myself, *done),
                    OpResult::Drained(pass) => state.on_drained(&myself, pass),
                    OpResult::Undone { finalizer, result } => {
                        if state.on_undone(&myself, finalizer, result) {
                            return Ok(());
                        }
                    }
                }
                if state.ops.take_again() {
                    state.kick(&myself);
                }
            }
            NodeMsg::StatusWritten(result) => state.on_status_written(&myself, result),
            NodeMsg::Eviction(report) => state.on_report(&myself, report),
        }
        state.note_phase();
        Ok(())
    }
}
