//! What each message does to a node actor: decide (see [`super::decide`]), then act through the
//! primitives of [`super::state`]. (The lease's messages are in `lease_transitions`.)

use ractor::ActorRef;

use super::decide::{self, AfterReconcile, OnUpdate};
use super::drain::Drain;
use super::errors::UndoError;
use super::messages::{NodeMsg, StatusOutcome, Wake, WatchKind};
use super::ops::{DrainPass, Reconciled};
use super::pending::PendingPod;
use super::stage::{Failure, Stage};
use super::state::NodeActorState;
use super::status;
use crate::decisions;
use crate::eviction::EvictionReport;
use crate::model::{
    EventType, FailureKind, Lease, Maintenance, NodeState, Phase, PodList, SpecField, VmList,
    reasons,
};
use crate::stop::StopReason;

impl NodeActorState {
    /// The NodeMaintenance changed.
    pub(super) fn on_update(&mut self, myself: &ActorRef<NodeMsg>, nm: Maintenance) {
        match decide::on_update(&self.stage, &nm) {
            OnUpdate::Undo => {
                self.nm.replaced(nm);
                self.start_undo(myself);
            }
            OnUpdate::Restart => {
                self.nm.restarted(nm);
                // A new attempt: a new `maintenance` trace, linked to the failed one.
                self.trace_phase(Phase::Running);
                self.set_stage(Stage::Starting);
                self.kick(myself);
            }
            OnUpdate::Continue => {
                self.nm.continued(&nm);
                // Someone else wrote the status (a late write of a replica that lost its
                // leadership, say): the API has that now, and what this actor wants goes back.
                if self.status.observed(nm.status.as_ref()) {
                    self.flush_status(myself);
                }
                if self.nm.drain_policy_now(nm.drain_policy) {
                    self.arm_deadline();
                    self.flush_status(myself);
                }
            }
        }
    }

    /// The NodeMaintenance is gone from the API without our undo having finished (its
    /// finalizer was removed by hand): finish the undo.
    pub(super) fn on_gone(&mut self, myself: &ActorRef<NodeMsg>) {
        self.nm.deleted();
        self.start_undo(myself);
    }

    /// A timer fired: each kind of wake-up goes to its handler.
    pub(super) fn on_wake(&mut self, myself: &ActorRef<NodeMsg>, wake: Wake) {
        match wake {
            Wake::Tick => self.on_tick(myself),
            Wake::RetryDue => self.on_retry_due(myself),
            Wake::RenewLease => self.renew_lease(myself, true),
            Wake::RetryRenewal => self.renew_lease(myself, false),
            Wake::LeaseExpiring => self.on_lease_expiring(myself),
            Wake::FlushStatus => {
                self.status.due();
                self.flush_status(myself);
            }
            Wake::Resubscribe(kind) => self.on_resubscribe(myself, kind),
            Wake::DrainDeadline => {
                self.check_deadline(myself);
            }
        }
    }

    /// The retry timer: re-checks unfinished work, unless a failed step's backoff runs.
    pub(super) fn on_tick(&mut self, myself: &ActorRef<NodeMsg>) {
        if self.check_deadline(myself) {
            return;
        }
        self.flush_status(myself);
        if let Some(drain) = self.stage.drain_mut() {
            drain.retry_refused();
        }
        if decide::retries_on_tick(&self.stage) && !self.retry.held() {
            self.take_in_or_pass(myself);
        }
    }

    /// A backoff (or a paced start-up) is over.
    pub(super) fn on_retry_due(&mut self, myself: &ActorRef<NodeMsg>) {
        self.retry.hold_over();
        self.flush_status(myself);
        self.kick(myself);
    }

    /// Whether the spec is invalid in a way that stops the maintenance before it does
    /// anything: any invalid field before it started (no phase yet), an invalid node name at
    /// any time (no call made with it could have reached the node).
    pub(super) fn must_not_start(&self) -> bool {
        let started = self.status.wanted().phase.is_some()
            && !crate::fleet::awaiting_start(self.status.wanted());
        self.nm
            .seen()
            .invalid
            .as_ref()
            .is_some_and(|problem| !started || problem.field == SpecField::NodeName)
    }

    /// The spec is invalid (see [`Self::must_not_start`]): Failed, naming the field, with
    /// nothing touched.
    pub(super) fn fail_invalid_spec(&mut self, myself: &ActorRef<NodeMsg>) {
        let Some(problem) = self.nm.seen().invalid.clone() else {
            return;
        };
        let now = self.now();
        let already = self.status.written().is_some_and(|w| {
            w.phase == Some(Phase::Failed) && w.last_error.as_deref() == Some(&problem.message)
        });
        self.trace
            .span()
            .in_scope(|| tracing::warn!(error = %problem.message, "invalid NodeMaintenance"));
        self.set_stage(Stage::Failed {
            why: Failure::InvalidSpec,
            undo_due: false,
        });
        self.status
            .maintenance_failed(FailureKind::InvalidSpec, problem.message.clone(), now);
        if !already {
            self.event(EventType::Warning, reasons::FAILED, problem.message);
        }
        self.flush_status(myself);
    }

    /// A maintenance found Failed in the API stays Failed (one failed for a missing node is
    /// started again when its spec changes); if it gave up and its undo is still due, the undo
    /// runs. A drain that passed its deadline and holds its node for a person keeps its node
    /// lease renewed, as before the restart (or the leader handover), from now on.
    pub(super) fn enter_recorded_failure(&mut self, myself: &ActorRef<NodeMsg>) {
        let why = Failure::recorded(self.status.wanted(), self.nm.seen());
        let undo_due = status::undo_pending(self.status.wanted());
        if undo_due {
            // A give-up recorded by an older nmo says nothing yet: say it before undoing.
            let now = self.now();
            self.status.undo_due(now);
        }
        self.set_stage(Stage::Failed { why, undo_due });
        if self.stage.keeps_lease() {
            self.lease
                .keep_renewing(&mut self.timers, self.ctx.config.lease_renew_interval);
            // nmo may have been down for a while: renewed now, not an interval from now.
            self.renew_lease(myself, true);
        }
    }

    /// A reconcile ended.
    pub(super) fn on_reconciled(&mut self, myself: &ActorRef<NodeMsg>, done: Reconciled) {
        let now = self.now();
        if let Some(fresh) = done.fresh {
            self.status.reread(fresh.status.clone());
            let deleting = fresh.deleting;
            self.nm.reread(fresh);
            if deleting {
                self.start_undo(myself);
                return;
            }
            // A deletion seen meanwhile wins over a stale read.
            if self.status.wanted().phase == Some(Phase::Failed) && !self.stage.is_undoing() {
                self.enter_recorded_failure(myself);
                return;
            }
        }
        if done.finalizer_added {
            self.nm.finalizer_added();
        }
        if let Some(initial) = done.initial {
            self.status.began(&initial, now);
            self.watches.first_pods_counted();
        }
        if self.stage.is_undoing() || matches!(self.stage, Stage::Failed { .. }) {
            // The result raced the deletion or a give-up: those win.
            return;
        }
        let sent = self.reconciles.ended();
        if done.marked_for_this {
            self.lease.held_before();
        }
        match decide::after_reconcile(done.outcome, self.lease.held_once()) {
            AfterReconcile::Ready {
                node,
                lease,
                finding,
            } => {
                self.step_succeeded();
                let now = self.now();
                self.status
                    .node_recorded(&node, &self.ctx.nm_uid, finding, now);
                self.ready(myself, &node, &lease, sent);
            }
            AfterReconcile::NodeMissing(error) => self.node_missing(error.to_string(), now),
            AfterReconcile::WaitForLease { holder, until } => {
                self.status.waiting_for_lease(&holder, until, now);
                self.set_stage(Stage::WaitingForLease { holder, until });
            }
            AfterReconcile::LeaseFailed(error) => {
                self.step_failed();
                self.lease_failed(myself, error);
                return;
            }
            AfterReconcile::NoLeaseYet(error) => {
                self.step_failed();
                self.status.last_error(Some(error.to_string()));
            }
            AfterReconcile::StepFailed(error) => {
                self.step_failed();
                self.trace
                    .span()
                    .in_scope(|| tracing::warn!(%error, "maintenance step failed, retrying"));
                self.status.last_error(Some(error.to_string()));
            }
            AfterReconcile::Gone => {
                myself.stop(StopReason::Gone.text());
                return;
            }
            AfterReconcile::Nothing => {}
        }
        self.flush_status(myself);
    }

    /// The reconcile found no Node: the maintenance fails (its event once per error).
    fn node_missing(&mut self, error: String, now: chrono::DateTime<chrono::Utc>) {
        let already = self.status.written().is_some_and(|w| {
            w.phase == Some(Phase::Failed) && w.last_error.as_deref() == Some(&error)
        });
        self.set_stage(Stage::Failed {
            why: Failure::NodeMissing {
                reason: self.nm.seen().reason.clone(),
            },
            undo_due: false,
        });
        self.status
            .maintenance_failed(FailureKind::NodeMissing, error.clone(), now);
        if !already {
            self.event(EventType::Warning, reasons::FAILED, error);
        }
    }

    /// Lease held and node in maintenance: guard it, and drain unless drained before.
    fn ready(
        &mut self,
        myself: &ActorRef<NodeMsg>,
        node: &NodeState,
        lease: &Lease,
        sent: Option<tokio::time::Instant>,
    ) {
        self.trace.span().in_scope(
            || tracing::debug!(node = %node.name, lease = %lease.name, "node in maintenance"),
        );
        let now = self.now();
        let sent = sent.unwrap_or_else(tokio::time::Instant::now);
        self.lease.acquired(
            &mut self.timers,
            &node.uid,
            sent,
            self.ctx.config.lease_duration,
        );
        self.lease.wrote(lease);
        let margin = self.pause_margin();
        self.lease.watch_expiry(&mut self.timers, margin);
        if self.lease.resume() {
            self.trace
                .span()
                .in_scope(|| tracing::info!("node lease taken again, evictions resume"));
        }
        self.status.lease_acquired(now);
        self.watches
            .watch_node(self.ctx.cluster.as_ref(), &self.ctx.node_name, myself);
        self.lease
            .keep_renewing(&mut self.timers, self.ctx.config.lease_renew_interval);
        self.watches.watch_lease(
            self.ctx.cluster.as_ref(),
            &self.ctx.config.lease_namespace,
            &lease.name,
            myself,
        );
        if self.status.wanted().phase == Some(Phase::Succeeded) {
            self.set_stage(Stage::Succeeded);
            return;
        }
        self.status.running();
        if !matches!(self.stage, Stage::Draining(_)) {
            let mut drain = Drain::begin(self.trace.span(), self.status.wanted().eviction_pods);
            drain.pods_listed(self.watches.take_pods());
            drain.node_ready(&node.name, &node.ready);
            self.set_stage(Stage::Draining(Box::new(drain)));
            self.status.drain_started(now);
            self.arm_deadline();
        }
        self.watches
            .watch_pods(self.ctx.cluster.as_ref(), &self.ctx.node_name, myself);
        self.ops.again();
    }

    /// A drain pass ended.
    pub(super) fn on_drained(&mut self, myself: &ActorRef<NodeMsg>, mut pass: DrainPass) {
        let Some(drain) = self.stage.drain_mut() else {
            return;
        };
        self.daemonsets.extend(std::mem::take(&mut pass.daemonsets));
        let failed = !pass.errors.is_empty();
        let to_ask = drain.apply(pass);
        self.ask_evictions(myself, to_ask);
        if failed {
            self.step_failed();
        } else {
            self.step_succeeded();
        }
        self.update_drain_status(myself);
    }

    /// The node's KubeVirt VMIs changed.
    pub(super) fn on_vms_changed(&mut self, myself: &ActorRef<NodeMsg>, vms: VmList) {
        if self.stage.drain_mut().is_some_and(|drain| drain.vms(vms)) {
            self.update_drain_status(myself);
        }
    }

    /// Hands the drain's pods `to_ask` to the eviction actor, unless the lease is about to
    /// lapse (evictions wait for its renewal then).
    fn ask_evictions(&mut self, myself: &ActorRef<NodeMsg>, to_ask: Vec<PendingPod>) {
        // Withdrawals go whatever the lease says: they only ever stop an eviction.
        let Some(drain) = self.stage.drain_mut() else {
            return;
        };
        // A launcher pod's VM says what its drain waits for, in KubeVirt's words.
        if drain.has_launcher_pods() {
            self.watches
                .watch_vms(self.ctx.cluster.as_ref(), &self.ctx.node_name, myself);
        }
        let Some(drain) = self.stage.drain_mut() else {
            return;
        };
        for (pod, uid) in drain.take_withdrawn() {
            self.evictions.withdraw(pod, uid);
        }
        if self.lease.paused() {
            return;
        }
        let span = drain.span().clone();
        for pending in to_ask {
            if self.evictions.evict(&pending, &span)
                && let Some(drain) = self.stage.drain_mut()
            {
                drain.asked(&pending);
            }
        }
    }

    /// An answer of the eviction actor.
    pub(super) fn on_report(&mut self, myself: &ActorRef<NodeMsg>, report: EvictionReport) {
        if self
            .stage
            .drain_mut()
            .is_some_and(|drain| drain.report(report))
        {
            self.update_drain_status(myself);
        }
    }

    /// Writes what the drain says into the status; a drained node succeeds, unless another
    /// operator holds its lease (nmo no longer holds the node: the status keeps saying so
    /// until the lease is nmo's again or nmo gives up).
    fn update_drain_status(&mut self, myself: &ActorRef<NodeMsg>) {
        if self.lease.taken_by().is_some() {
            self.flush_status(myself);
            return;
        }
        let now = self.now();
        let drained = self
            .stage
            .drain()
            .is_some_and(|drain| self.status.drain_progress(drain, now));
        self.note_blockage(now);
        if drained {
            let first = self.status.written().and_then(|w| w.phase) != Some(Phase::Succeeded);
            self.set_stage(Stage::Succeeded);
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

    /// An undo ended; true when the actor is done (stopped).
    pub(super) fn on_undone(
        &mut self,
        myself: &ActorRef<NodeMsg>,
        finalizer: bool,
        result: Result<(), UndoError>,
    ) -> bool {
        match result {
            Ok(()) if finalizer => {
                myself.stop(StopReason::Undone.text());
                true
            }
            Ok(()) => {
                // A give-up's undo: the status says the node is restored.
                self.step_succeeded();
                let now = self.now();
                self.status.restored(now);
                self.flush_status(myself);
                false
            }
            Err(error) => {
                self.trace
                    .span()
                    .in_scope(|| tracing::warn!(%error, "undo failed, retrying"));
                if !finalizer {
                    self.stage.undo_failed();
                }
                self.step_failed();
                false
            }
        }
    }

    /// A status write ended.
    pub(super) fn on_status_written(&mut self, myself: &ActorRef<NodeMsg>, outcome: StatusOutcome) {
        match outcome {
            StatusOutcome::Written(written) => {
                self.status.ended(Some(written));
                self.flush_status(myself);
                // A give-up's undo waits for its Failed status to be written.
                if matches!(self.stage, Stage::Failed { undo_due: true, .. }) {
                    self.kick(myself);
                }
            }
            StatusOutcome::Refused(fresh) => {
                self.trace.span().in_scope(|| {
                    tracing::info!("status changed since it was read, writing over the fresh one")
                });
                self.status
                    .refused(fresh, tokio::time::Instant::now(), &self.ctx.config);
                self.flush_status(myself);
            }
            StatusOutcome::Gone => self.status.ended(None),
            StatusOutcome::Failed(err) => {
                self.status
                    .failed(tokio::time::Instant::now(), &self.ctx.config);
                self.trace
                    .span()
                    .in_scope(|| tracing::warn!(error = %err, "cannot write status, retrying"));
                self.flush_status(myself);
            }
        }
    }

    /// The Node changed (None: it does not exist).
    pub(super) fn on_node_changed(&mut self, myself: &ActorRef<NodeMsg>, node: Option<NodeState>) {
        // A node that is not Ready finishes none of its terminating pods: the drain says so.
        if let Some(node) = &node
            && let Some(drain) = self.stage.drain_mut()
            && drain.node_ready(&node.name, &node.ready)
        {
            self.update_drain_status(myself);
        }
        if let Some(node) = node
            && self.stage.guards_node()
            && decisions::maintenance_patch(
                &node,
                &self.ctx.nm_uid,
                self.status.wanted().node_record.as_ref(),
                self.now(),
            )
            .is_some()
        {
            self.trace
                .span()
                .in_scope(|| tracing::info!("node changed under maintenance, repairing"));
            self.reconciles.node_drifted();
            self.kick(myself);
        }
    }

    /// The node's pods changed.
    pub(super) fn on_pods_changed(&mut self, myself: &ActorRef<NodeMsg>, pods: PodList) {
        if let Some(drain) = self.stage.drain_mut() {
            drain.pods_listed(Some(pods));
            self.take_in_or_pass(myself);
        } else {
            // Watched since the start: the drain begins with the latest list.
            self.watches.keep_pods(pods);
        }
    }

    /// Takes the drain's latest pod list in where it is when no call is needed (see
    /// [`Drain::take_without_pass`]), else runs a pass. Pod changes come this way, and so
    /// does the retry tick: at 2,000 nodes a drain waits seconds for its paced evictions, and a
    /// pass on every tick classified every pod again to ask for the few the queue refused.
    fn take_in_or_pass(&mut self, myself: &ActorRef<NodeMsg>) {
        // While an operation runs, the pass after it takes the list in: taking it in now would
        // be undone by the running pass's older list. A repair due or a lease about to lapse
        // goes to `kick`, which repairs first or waits (the status says evictions are paused).
        let wait = self.ops.running() || self.reconciles.repair_due() || self.lease.paused();
        let taken = match self.stage.drain_mut() {
            Some(drain) if !wait => drain.take_latest_without_pass(&self.daemonsets),
            _ => None,
        };
        match taken {
            Some(to_ask) => {
                self.ask_evictions(myself, to_ask);
                self.update_drain_status(myself);
            }
            None => self.kick(myself),
        }
    }

    /// A watch ended: subscribe again after the retry interval. A re-subscription of this
    /// watch still pending (the watch was started again another way, and ended again) stays:
    /// it subscribes again sooner.
    pub(super) fn on_watch_ended(&mut self, kind: WatchKind) {
        self.watches.ended(kind);
        self.timers
            .set_unless_sooner(Wake::Resubscribe(kind), self.ctx.config.retry_interval);
    }

    /// Time to subscribe again, if the stage still wants the watch.
    pub(super) fn on_resubscribe(&mut self, myself: &ActorRef<NodeMsg>, kind: WatchKind) {
        if !decide::resubscribes(&self.stage, kind) {
            return;
        }
        let (cluster, node) = (self.ctx.cluster.as_ref(), &self.ctx.node_name);
        match kind {
            WatchKind::Node => self.watches.watch_node(cluster, node, myself),
            WatchKind::Pods => self.watches.watch_pods(cluster, node, myself),
            WatchKind::Lease => self.watches.watch_lease(
                cluster,
                &self.ctx.config.lease_namespace,
                &decisions::lease_name(node),
                myself,
            ),
            WatchKind::Vms => self.watches.watch_vms(cluster, node, myself),
        }
    }
}
