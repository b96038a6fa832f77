//! The node actor: one maintenance, from finalizer to undo. It owns the lease and its renewal
//! timer, the label/taint/cordon state (repaired when the Node watch shows drift), the drain
//! and its retry timer, and what the status should say.
//!
//! Handlers only decide; cluster work runs in spawned tasks ([`ops`]) whose results come back
//! as messages, so a slow API or a PDB-blocked drain never stalls the mailbox (deletion
//! included).

mod errors;
mod messages;
mod ops;
mod status;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use ractor::{Actor, ActorProcessingErr, ActorRef, DerivedActorRef};
use tokio::task::JoinHandle;
use tracing::Instrument;

pub use errors::LeaseProblem;
pub use messages::{NodeMsg, WatchKind};
pub use ops::{DrainPass, InitialCounts, OpResult, ReconcileOutcome, Reconciled};

use crate::config::Config;
use crate::eviction::{EvictionMsg, EvictionReply, EvictionReport, EvictionRequest};
use crate::model::{
    EventType, Maintenance, MaintenanceStatus, PendingPodReason, Phase, PodRef, conditions, reasons,
};
use crate::observe::{LeaseOp, PhaseReport};
use crate::plan::{self, PodAction};
use crate::ports::{Cluster, ClusterError};
use ops::OpCtx;

/// Stop reason of a node actor whose maintenance was undone and released.
pub const STOP_UNDONE: &str = "undone";
/// Stop reason of a node actor whose NodeMaintenance no longer exists.
pub const STOP_GONE: &str = "gone";

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
    /// The cluster.
    pub cluster: Arc<dyn Cluster>,
    /// Tunables.
    pub config: Arc<Config>,
    /// The eviction actor.
    pub evictor: ActorRef<EvictionMsg>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Finalizer, first status, node, lease, cordon: not done yet.
    Starting,
    /// Someone else holds a valid lease.
    WaitingForLease,
    /// Cordoned; pods being removed.
    Draining,
    /// Drained; guarding the node (drift, lease).
    Succeeded,
    /// Gave up; waits for deletion (or a spec change after a missing node).
    Failed,
    /// Deleted: undoing.
    Undoing,
}

/// State of [`NodeActor`].
pub struct NodeActorState {
    ctx: OpCtx,
    evictor: ActorRef<EvictionMsg>,
    /// Where the eviction actor sends its reports: this actor, seen only as a receiver of
    /// [`EvictionReport`]s.
    reports: DerivedActorRef<EvictionReport>,
    nm: Maintenance,
    stage: Stage,
    /// What the status should say.
    status: MaintenanceStatus,
    /// What the API has (last written or read).
    written: Option<MaintenanceStatus>,
    status_busy: bool,
    /// Until when progress-only writes wait (coalescing), and whether a write is scheduled.
    status_hold_until: Option<tokio::time::Instant>,
    status_flush_scheduled: bool,
    /// An operation ([`ops`]) is running; `dirty` asks for another one after it.
    busy: bool,
    dirty: bool,
    /// The first operation re-reads the NodeMaintenance (crash safety).
    refreshed: bool,
    /// The node drifted: the next operation re-applies label, taints and cordon.
    repair: bool,
    /// `spec.reason` when the maintenance failed for a missing node (retry on change).
    failed_reason: Option<String>,
    /// Uid of the node (the lease's owner), once read.
    node_uid: String,
    /// The node part of the undo is due after giving up.
    fail_undo: bool,
    /// We held the lease at least once (lease failures count from then on, like NMO).
    held_lease: bool,
    renew_busy: bool,
    pods: Option<Vec<crate::model::PodInfo>>,
    daemonsets: HashMap<(String, String), bool>,
    /// The last drain pass's pending pods and their actions.
    pending: Vec<PendingPod>,
    /// Uids of pods whose eviction was accepted or which were deleted: a watch snapshot that
    /// still shows them (it may lag) must not cause a second call.
    handled: HashSet<String>,
    /// Pods handed to the eviction actor and not finally answered.
    asked: HashSet<PodRef>,
    reasons: BTreeMap<PodRef, PendingPodReason>,
    drain_errors: Vec<String>,
    tick: Option<JoinHandle<()>>,
    renew: Option<JoinHandle<()>>,
    node_watch: Option<JoinHandle<()>>,
    pod_watch: Option<JoinHandle<()>>,
    /// The trace root: `maintenance` until the deletion is seen, then `end_maintenance`.
    span: tracing::Span,
    /// The drain's span (parent of every eviction attempt) and when the drain began.
    drain: Option<(tracing::Span, tokio::time::Instant)>,
    /// The phase last reported to the observer (withdrawn when the state is dropped).
    observed_phase: PhaseReport,
}

/// A pod the drain still waits for.
#[derive(Debug, Clone)]
pub(crate) struct PendingPod {
    pod: PodRef,
    uid: String,
    action: PodAction,
    grace: Option<i64>,
}

fn missing_node(node: &str) -> String {
    format!("node {node} not found")
}

fn abort(handle: &mut Option<JoinHandle<()>>) {
    if let Some(h) = handle.take() {
        h.abort();
    }
}

impl NodeActorState {
    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.ctx.config.now()
    }

    /// Starts the next operation, or remembers to once the running one is done.
    fn kick(&mut self, myself: &ActorRef<NodeMsg>) {
        if self.busy {
            self.dirty = true;
            return;
        }
        let ctx = self.ctx.clone();
        let actor = myself.clone();
        let span = self.span.clone();
        match self.stage {
            Stage::Failed if self.fail_undo => {
                self.fail_undo = false;
                let span = tracing::info_span!(parent: &span, "undo");
                tokio::spawn(
                    async move {
                        let result = ops::undo(ctx, false).await;
                        let _ = actor.cast(NodeMsg::Op(OpResult::Undone {
                            finalizer: false,
                            result,
                        }));
                    }
                    .instrument(span),
                );
            }
            Stage::Failed => return,
            Stage::Undoing => {
                let span = tracing::info_span!(parent: &span, "undo");
                tokio::spawn(
                    async move {
                        let result = ops::undo(ctx, true).await;
                        let _ = actor.cast(NodeMsg::Op(OpResult::Undone {
                            finalizer: true,
                            result,
                        }));
                    }
                    .instrument(span),
                );
            }
            Stage::Starting | Stage::WaitingForLease => self.spawn_reconcile(myself),
            Stage::Draining | Stage::Succeeded if self.repair => {
                self.repair = false;
                self.spawn_reconcile(myself);
            }
            // The pod watch's first snapshot is on its way: no need to LIST as well.
            Stage::Draining if self.pods.is_none() && self.pod_watch.is_some() => return,
            Stage::Draining => {
                let snapshot = self.pods.clone();
                let known = self.daemonsets.clone();
                let handled = self.handled.clone();
                // A pass runs on every pod change and every retry tick: it gets no span of its
                // own (hours of a blocked drain would make thousands); what it does (deleting
                // pods) is recorded inside the drain's span.
                let span = self.drain.as_ref().map_or(span, |(drain, _)| drain.clone());
                tokio::spawn(
                    async move {
                        let pass = ops::drain_pass(ctx, snapshot, known, handled).await;
                        let _ = actor.cast(NodeMsg::Op(OpResult::Drained(pass)));
                    }
                    .instrument(span),
                );
            }
            Stage::Succeeded => return,
        }
        self.busy = true;
    }

    fn spawn_reconcile(&mut self, myself: &ActorRef<NodeMsg>) {
        let ctx = self.ctx.clone();
        let actor = myself.clone();
        let refresh = !self.refreshed;
        let finalizers = self.nm.finalizers.clone();
        let first_time = self.status.phase.is_none();
        let known = self.daemonsets.clone();
        let span = tracing::info_span!(parent: &self.span, "reconcile");
        tokio::spawn(
            async move {
                let done = ops::reconcile(ctx, refresh, finalizers, first_time, known).await;
                let _ = actor.cast(NodeMsg::Op(OpResult::Reconciled(Box::new(done))));
            }
            .instrument(span),
        );
    }

    /// Writes the status if it differs from what the API has; one write at a time.
    fn flush_status(&mut self, myself: &ActorRef<NodeMsg>) {
        if self.status_busy || self.stage == Stage::Undoing {
            return;
        }
        let differs = self
            .written
            .as_ref()
            .is_none_or(|w| plan::status_differs(&self.status, w));
        if !differs || self.status.phase.is_none() {
            return;
        }
        let phase_changes = self.written.as_ref().map(|w| w.phase) != Some(self.status.phase);
        let now = tokio::time::Instant::now();
        if !phase_changes && let Some(until) = self.status_hold_until.filter(|until| *until > now) {
            if !self.status_flush_scheduled {
                self.status_flush_scheduled = true;
                myself.send_after(until - now, || NodeMsg::FlushStatus);
            }
            return;
        }
        self.status_hold_until = Some(now + self.ctx.config.status_coalesce);
        self.status.last_update = Some(self.now());
        self.status_busy = true;
        let cluster = self.ctx.cluster.clone();
        let name = self.ctx.nm_name.clone();
        let status = self.status.clone();
        let actor = myself.clone();
        // Status writes are coalesced, so a span each stays cheap and shows when the status
        // said what.
        let span = tracing::info_span!(
            parent: &self.span,
            "write_status",
            phase = status.phase.map(Phase::as_str).unwrap_or_default(),
            drain_progress = status.drain_progress,
        );
        tokio::spawn(
            async move {
                let result = cluster.write_status(&name, &status).await.map(|()| status);
                let _ = actor.cast(NodeMsg::StatusWritten(result));
            }
            .instrument(span),
        );
    }

    fn event(&self, type_: EventType, reason: &str, message: String) {
        let cluster = self.ctx.cluster.clone();
        let event = ops::nm_event(&self.ctx, type_, reason, message);
        tokio::spawn(async move { ops::emit(&cluster, event).await }.instrument(self.span.clone()));
    }

    /// Opens the drain's span (once per drain).
    fn begin_drain(&mut self) {
        if self.drain.is_none() {
            let span = tracing::info_span!(
                parent: &self.span,
                "drain",
                pods.to_evict = self.status.eviction_pods,
                outcome = tracing::field::Empty,
            );
            self.drain = Some((span, tokio::time::Instant::now()));
        }
    }

    /// Tells the observer (and the trace root) about a phase change.
    fn note_phase(&mut self) {
        if self.stage == Stage::Undoing || !self.observed_phase.set(self.status.phase) {
            return;
        }
        if let Some(phase) = self.status.phase {
            self.span.record("phase", phase.as_str());
        }
    }

    /// No longer driving this maintenance: the phase gauge forgets it.
    fn forget_phase(&mut self) {
        self.observed_phase.set(None);
    }

    fn start_node_watch(&mut self, myself: &ActorRef<NodeMsg>) {
        if self.node_watch.is_some() {
            return;
        }
        let mut stream = self.ctx.cluster.watch_node(&self.ctx.node_name);
        let actor = myself.clone();
        self.node_watch = Some(tokio::spawn(async move {
            while let Some(node) = stream.next().await {
                if actor.cast(NodeMsg::NodeChanged(node)).is_err() {
                    return;
                }
            }
            let _ = actor.cast(NodeMsg::WatchEnded(WatchKind::Node));
        }));
    }

    fn start_pod_watch(&mut self, myself: &ActorRef<NodeMsg>) {
        if self.pod_watch.is_some() {
            return;
        }
        let mut stream = self.ctx.cluster.watch_pods(&self.ctx.node_name);
        let actor = myself.clone();
        self.pod_watch = Some(tokio::spawn(async move {
            while let Some(pods) = stream.next().await {
                if actor.cast(NodeMsg::PodsChanged(pods)).is_err() {
                    return;
                }
            }
            let _ = actor.cast(NodeMsg::WatchEnded(WatchKind::Pods));
        }));
    }

    fn start_renewal(&mut self, myself: &ActorRef<NodeMsg>) {
        if self.renew.is_none() {
            self.renew = Some(
                myself.send_interval(self.ctx.config.lease_renew_interval, || NodeMsg::RenewLease),
            );
        }
    }

    fn stop_drain(&mut self) {
        if let Some((span, _)) = self.drain.take()
            && self.stage != Stage::Succeeded
        {
            span.record("outcome", "stopped");
        }
        abort(&mut self.pod_watch);
        self.pods = None;
        if !self.asked.is_empty() {
            let _ = self.evictor.cast(EvictionMsg::Cancel {
                maintenance: self.ctx.nm_name.clone(),
            });
            self.asked.clear();
        }
    }

    fn start_undo(&mut self, myself: &ActorRef<NodeMsg>) {
        if self.stage == Stage::Undoing {
            return;
        }
        // Log lines are emitted inside the span (not with `parent:`): JSON logs list the spans
        // entered, so that is how a line gets the maintenance's node and trace id.
        self.span
            .in_scope(|| tracing::info!("maintenance deleted, undoing"));
        self.note_phase();
        self.forget_phase();
        self.ctx.deleting.store(true, Ordering::SeqCst);
        self.stage = Stage::Undoing;
        self.stop_drain();
        // Ending maintenance is its own trace, linked to the maintenance's: the maintenance's
        // root span ends here (once its last children do), so Jaeger shows it complete.
        let end = tracing::info_span!(
            parent: None,
            "end_maintenance",
            maintenance = %self.ctx.nm_name,
            node = %self.ctx.node_name,
            trace_id = tracing::field::Empty,
        );
        end.follows_from(&self.span);
        self.ctx.config.observer.trace_root(&end);
        self.span = end;
        abort(&mut self.renew);
        abort(&mut self.node_watch);
        self.kick(myself);
    }

    /// Stops the maintenance after repeated lease failures: undo the node, phase Failed.
    fn give_up(&mut self, myself: &ActorRef<NodeMsg>, error: String) {
        let now = self.now();
        self.stage = Stage::Failed;
        self.failed_reason = None;
        self.stop_drain();
        abort(&mut self.renew);
        abort(&mut self.node_watch);
        status::fail(&mut self.status, error.clone(), now);
        self.event(EventType::Warning, reasons::FAILED, error);
        self.flush_status(myself);
        self.fail_undo = true;
        self.kick(myself);
    }

    /// Counts one failure to take or keep the lease; gives up above the limit.
    fn lease_failed(&mut self, myself: &ActorRef<NodeMsg>, error: String) {
        let counted = plan::lease_failure(self.status.error_on_lease_count, self.held_lease);
        self.status.error_on_lease_count = counted.count;
        if counted.give_up {
            self.give_up(
                myself,
                format!("failed to extend lease owned by us: {error}"),
            );
        } else {
            self.status.last_error = Some(error);
            self.flush_status(myself);
        }
    }

    /// A maintenance found Failed in the API stays Failed; one failed for a missing node is
    /// retried when its spec changes.
    fn enter_failed(&mut self) {
        self.stage = Stage::Failed;
        if self.status.last_error.as_deref() == Some(&missing_node(&self.ctx.node_name)) {
            self.failed_reason = Some(self.nm.reason.clone());
        }
    }

    fn on_reconciled(&mut self, myself: &ActorRef<NodeMsg>, done: Reconciled) {
        let now = self.now();
        if let Some(fresh) = done.fresh {
            self.refreshed = true;
            self.written = fresh.status.clone();
            if let Some(status) = fresh.status.clone() {
                self.status = status;
            }
            let deleting = fresh.deleting;
            self.nm = fresh;
            if deleting {
                self.start_undo(myself);
                return;
            }
            if self.status.phase == Some(Phase::Failed) {
                self.enter_failed();
                return;
            }
        }
        if done.finalizer_added && !self.nm.has_finalizer() {
            self.nm.finalizers.push(crate::model::FINALIZER.to_string());
        }
        if let Some(initial) = done.initial {
            status::begin(&mut self.status, &initial, now);
        }
        if self.stage == Stage::Undoing {
            return;
        }
        match done.outcome {
            ReconcileOutcome::Ready { node, lease } => {
                self.span.in_scope(|| tracing::debug!(node = %node.name, lease = %lease.name, "node in maintenance"));
                self.held_lease = true;
                self.node_uid = node.uid.clone();
                status::lease_acquired(&mut self.status, now);
                self.start_node_watch(myself);
                self.start_renewal(myself);
                if self.status.phase == Some(Phase::Succeeded) {
                    self.stage = Stage::Succeeded;
                } else {
                    self.status.phase = Some(Phase::Running);
                    self.stage = Stage::Draining;
                    self.begin_drain();
                    self.start_pod_watch(myself);
                    self.dirty = true;
                }
            }
            ReconcileOutcome::NodeMissing => {
                let error = missing_node(&self.ctx.node_name);
                let already = self.written.as_ref().is_some_and(|w| {
                    w.phase == Some(Phase::Failed) && w.last_error.as_deref() == Some(&error)
                });
                self.stage = Stage::Failed;
                self.failed_reason = Some(self.nm.reason.clone());
                status::fail(&mut self.status, error.clone(), now);
                if !already {
                    self.event(EventType::Warning, reasons::FAILED, error);
                }
            }
            ReconcileOutcome::LeaseHeld { holder, until } => {
                if self.held_lease {
                    self.lease_failed(myself, format!("lease taken by {holder}"));
                    return;
                }
                self.stage = Stage::WaitingForLease;
                status::waiting_for_lease(&mut self.status, &holder, until, now);
            }
            ReconcileOutcome::LeaseError(error) => {
                if self.held_lease {
                    self.lease_failed(myself, error);
                    return;
                }
                self.status.last_error = Some(error);
            }
            ReconcileOutcome::Error(error) => {
                self.span
                    .in_scope(|| tracing::warn!(%error, "maintenance step failed, retrying"));
                self.status.last_error = Some(error);
            }
            ReconcileOutcome::Gone => {
                myself.stop(Some(STOP_GONE.to_string()));
                return;
            }
            ReconcileOutcome::Skipped => {}
        }
        self.flush_status(myself);
    }

    fn on_drained(&mut self, myself: &ActorRef<NodeMsg>, pass: DrainPass) {
        if self.stage != Stage::Draining {
            return;
        }
        self.daemonsets.extend(pass.daemonsets);
        self.drain_errors = pass.errors;
        self.handled.extend(pass.deleted);
        self.pending = pass
            .pods
            .iter()
            .filter(|(_, action)| action.is_pending())
            .map(|(pod, action)| PendingPod {
                pod: pod.pod_ref(),
                uid: pod.uid.clone(),
                action: *action,
                grace: pod.grace_period_seconds,
            })
            .collect();
        let present: HashSet<PodRef> = self.pending.iter().map(|p| p.pod.clone()).collect();
        let uids: HashSet<&String> = pass.pods.iter().map(|(p, _)| &p.uid).collect();
        self.handled.retain(|uid| uids.contains(uid));
        self.asked.retain(|p| present.contains(p));
        self.reasons.retain(|p, _| present.contains(p));
        for pending in self.pending.clone() {
            let PendingPod {
                pod,
                uid,
                action,
                grace,
            } = pending;
            if action != PodAction::Evict
                || self.asked.contains(&pod)
                || self.handled.contains(&uid)
            {
                continue;
            }
            let request = EvictionRequest {
                pod: pod.clone(),
                grace_period_seconds: grace,
                maintenance: self.ctx.nm_name.clone(),
                reply_to: self.reports.clone(),
                span: self
                    .drain
                    .as_ref()
                    .map_or_else(|| self.span.clone(), |(span, _)| span.clone()),
            };
            if self.evictor.cast(EvictionMsg::Evict(request)).is_ok() {
                self.asked.insert(pod);
            }
        }
        self.update_drain_status(myself);
    }

    fn update_drain_status(&mut self, myself: &ActorRef<NodeMsg>) {
        let now = self.now();
        let drained = status::drain(
            &mut self.status,
            &self.pending,
            &self.reasons,
            &self.drain_errors,
            now,
        );
        if drained {
            let first = self.written.as_ref().and_then(|w| w.phase) != Some(Phase::Succeeded);
            if let Some((span, began)) = &self.drain {
                span.record("outcome", "drained");
                self.ctx.config.observer.drain_finished(began.elapsed());
            }
            self.stage = Stage::Succeeded;
            self.stop_drain();
            self.reasons.clear();
            if first {
                self.event(
                    EventType::Normal,
                    reasons::SUCCEED,
                    format!("Node maintenance for node {} succeeded", self.ctx.node_name),
                );
            }
        }
        self.flush_status(myself);
    }

    fn on_eviction(&mut self, myself: &ActorRef<NodeMsg>, report: EvictionReport) {
        if self.stage != Stage::Draining {
            return;
        }
        let pod = report.pod;
        let (reason, pdb, message, final_) = match report.reply {
            EvictionReply::Done => (
                "Evicted",
                None,
                "eviction accepted, pod terminating".to_string(),
                true,
            ),
            EvictionReply::Blocked { pdb, message } => {
                (conditions::BLOCKED_BY_PDB, pdb, message, false)
            }
            EvictionReply::TooManyPdbs { message } => {
                ("TooManyPodDisruptionBudgets", None, message, true)
            }
            EvictionReply::NamespaceTerminating => (
                "NamespaceTerminating",
                None,
                "the pod's namespace is terminating".to_string(),
                true,
            ),
            EvictionReply::Refused => (
                "EvictionQueueFull",
                None,
                "eviction queue full, retrying".to_string(),
                true,
            ),
            EvictionReply::Failed(error) => ("EvictionFailed", None, error, true),
        };
        if final_ {
            self.asked.remove(&pod);
        }
        if reason == "Evicted"
            && let Some(p) = self.pending.iter().find(|p| p.pod == pod)
        {
            self.handled.insert(p.uid.clone());
        }
        if self.pending.iter().any(|p| p.pod == pod) {
            self.reasons.insert(
                pod.clone(),
                PendingPodReason {
                    namespace: pod.namespace.clone(),
                    name: pod.name.clone(),
                    reason: reason.to_string(),
                    pdb,
                    message,
                },
            );
            self.update_drain_status(myself);
        }
    }
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
        // A trace root of its own (never a child of whatever span the spawn happened in).
        let span = tracing::info_span!(
            parent: None,
            "maintenance",
            maintenance = %nm.name,
            node = %nm.node_name,
            reason = %nm.reason,
            phase = tracing::field::Empty,
            trace_id = tracing::field::Empty,
        );
        args.config.observer.trace_root(&span);
        let observed_phase = PhaseReport::new(args.config.observer.clone());
        let ctx = OpCtx {
            cluster: args.cluster,
            config: args.config,
            nm_name: nm.name.clone(),
            nm_uid: nm.uid.clone(),
            node_name: nm.node_name.clone(),
            deleting: Arc::new(AtomicBool::new(false)),
        };
        Ok(NodeActorState {
            ctx,
            evictor: args.evictor,
            reports: myself.get_derived(),
            status: nm.status.clone().unwrap_or_default(),
            written: nm.status.clone(),
            nm,
            stage: Stage::Starting,
            status_busy: false,
            status_hold_until: None,
            status_flush_scheduled: false,
            busy: false,
            dirty: false,
            refreshed: args.fresh,
            repair: false,
            failed_reason: None,
            fail_undo: false,
            node_uid: String::new(),
            held_lease: false,
            renew_busy: false,
            pods: None,
            daemonsets: HashMap::new(),
            pending: Vec::new(),
            asked: HashSet::new(),
            handled: HashSet::new(),
            reasons: BTreeMap::new(),
            drain_errors: Vec::new(),
            tick: None,
            renew: None,
            node_watch: None,
            pod_watch: None,
            span,
            drain: None,
            observed_phase,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.tick = Some(myself.send_interval(state.ctx.config.retry_interval, || NodeMsg::Tick));
        if state.nm.deleting {
            // Undo is decided from the cluster too, but a deletion needs no re-read first.
            state.refreshed = true;
            state.start_undo(&myself);
        } else if state.refreshed && state.status.phase == Some(Phase::Failed) {
            // Fresh from the watch and already Failed: stays Failed, as after a re-read.
            state.enter_failed();
        } else {
            state.kick(&myself);
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        abort(&mut state.tick);
        abort(&mut state.renew);
        abort(&mut state.node_watch);
        abort(&mut state.pod_watch);
        let _ = state.evictor.cast(EvictionMsg::Cancel {
            maintenance: state.ctx.nm_name.clone(),
        });
        state.forget_phase();
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            NodeMsg::Update(nm) => {
                let nm = *nm;
                if nm.deleting {
                    state.nm = nm;
                    state.start_undo(&myself);
                } else if state.stage == Stage::Failed
                    && state
                        .failed_reason
                        .as_ref()
                        .is_some_and(|reason| *reason != nm.reason)
                {
                    // A maintenance failed for a missing node is retried when its spec changes.
                    state.failed_reason = None;
                    state.stage = Stage::Starting;
                    state.nm.reason = nm.reason;
                    state.kick(&myself);
                } else {
                    state.nm.reason = nm.reason;
                    state.nm.finalizers = nm.finalizers;
                }
            }
            NodeMsg::FlushStatus => {
                state.status_flush_scheduled = false;
                state.flush_status(&myself);
            }
            NodeMsg::Tick => {
                state.flush_status(&myself);
                if matches!(
                    state.stage,
                    Stage::Starting | Stage::WaitingForLease | Stage::Draining | Stage::Undoing
                ) || (state.stage == Stage::Failed && state.fail_undo)
                {
                    state.kick(&myself);
                }
            }
            NodeMsg::RenewLease => {
                if matches!(state.stage, Stage::Draining | Stage::Succeeded) && !state.renew_busy {
                    state.renew_busy = true;
                    let ctx = state.ctx.clone();
                    let actor = myself.clone();
                    let node_uid = state.node_uid.clone();
                    let span = state.span.clone();
                    tokio::spawn(
                        async move {
                            // The node uid only matters if the lease vanished and is re-created.
                            let result =
                                ops::acquire_lease(&ctx, &node_uid, LeaseOp::Renew, false).await;
                            let _ = actor.cast(NodeMsg::LeaseRenewed(result));
                        }
                        .instrument(span),
                    );
                }
            }
            NodeMsg::LeaseRenewed(result) => {
                state.renew_busy = false;
                if !matches!(state.stage, Stage::Draining | Stage::Succeeded) {
                    return Ok(());
                }
                match result {
                    Ok(_) => {
                        if state.status.error_on_lease_count != 0 {
                            state.status.error_on_lease_count = 0;
                            state.flush_status(&myself);
                        }
                    }
                    Err(LeaseProblem::HeldByOther { holder, .. }) => {
                        state.lease_failed(&myself, format!("lease taken by {holder}"));
                    }
                    Err(LeaseProblem::Api(err)) => {
                        state.lease_failed(&myself, format!("cannot renew lease: {err}"));
                    }
                }
            }
            NodeMsg::NodeChanged(node) => {
                if let Some(node) = node
                    && matches!(state.stage, Stage::Draining | Stage::Succeeded)
                    && plan::maintenance_patch(&node, state.now()).is_some()
                {
                    state
                        .span
                        .in_scope(|| tracing::info!("node changed under maintenance, repairing"));
                    state.repair = true;
                    state.kick(&myself);
                }
            }
            NodeMsg::PodsChanged(pods) => {
                if state.stage == Stage::Draining {
                    state.pods = Some(pods);
                    state.kick(&myself);
                }
            }
            NodeMsg::WatchEnded(kind) => {
                match kind {
                    WatchKind::Node => state.node_watch = None,
                    WatchKind::Pods => state.pod_watch = None,
                }
                // Detached: a send to a stopped actor just fails, nothing to abort.
                drop(myself.send_after(state.ctx.config.retry_interval, move || {
                    NodeMsg::Resubscribe(kind)
                }));
            }
            NodeMsg::Resubscribe(kind) => match (kind, state.stage) {
                (WatchKind::Node, Stage::Draining | Stage::Succeeded) => {
                    state.start_node_watch(&myself);
                }
                (WatchKind::Pods, Stage::Draining) => state.start_pod_watch(&myself),
                _ => {}
            },
            NodeMsg::Op(result) => {
                state.busy = false;
                match result {
                    OpResult::Reconciled(done) => state.on_reconciled(&myself, *done),
                    OpResult::Drained(pass) => state.on_drained(&myself, pass),
                    OpResult::Undone { finalizer, result } => match result {
                        Ok(()) if finalizer => {
                            myself.stop(Some(STOP_UNDONE.to_string()));
                            return Ok(());
                        }
                        Ok(()) => {}
                        Err(error) => {
                            state
                                .span
                                .in_scope(|| tracing::warn!(%error, "undo failed, retrying"));
                            if !finalizer && state.stage == Stage::Failed {
                                // Retried on the next tick, like the deletion's undo.
                                state.fail_undo = true;
                            }
                        }
                    },
                }
                if state.dirty {
                    state.dirty = false;
                    state.kick(&myself);
                }
            }
            NodeMsg::StatusWritten(result) => {
                state.status_busy = false;
                match result {
                    Ok(written) => {
                        state.written = Some(written);
                        state.flush_status(&myself);
                    }
                    Err(ClusterError::NotFound(_)) => {}
                    Err(err) => {
                        state.span.in_scope(
                            || tracing::warn!(error = %err, "cannot write status, retrying"),
                        );
                    }
                }
            }
            NodeMsg::Eviction(report) => state.on_eviction(&myself, report),
        }
        state.note_phase();
        Ok(())
    }
}
