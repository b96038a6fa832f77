//! The node actor's state, and the primitives its transitions act through: run the next
//! operation, write the status, emit an event, change stage.

use ractor::ActorRef;
use tokio::time::Instant;
use tracing::Instrument;

use super::decide::{self, Facts, NextOp, next_op};
use super::drain::{Drain, DrainEnd};
use super::eviction_link::EvictionLink;
use super::lease_keeper::LeaseKeeper;
use super::maintenance_copy::MaintenanceCopy;
use super::messages::{NodeMsg, Wake, WatchKind};
use super::ops::{self, DaemonSets, Known, OpCtx, OpResult, ReconcileInput, UndoInput};
use super::reconciles::Reconciles;
use super::stage::{Failure, Stage};
use super::status_writer::{self, Flush, StatusWriter, Windows};
use super::step_retry::StepRetry;
use super::trace::TraceState;
use super::watches::Watches;
use crate::decisions;
use crate::model::{EventType, Phase};
use crate::observe::{BlockedReport, PhaseReport};
use crate::op_runner::OpRunner;
use crate::progress_pace::PaceSlot;
use crate::task::TaskSet;
use crate::timers::Timers;

/// State of [`super::NodeActor`]: the stage, and one component per concern. Each component
/// keeps its fields private and changes them only in its own file, through methods that say
/// what happened; its queries answer `decide` with facts. No field here is assigned after
/// `pre_start` but the stage, and that only in [`Self::set_stage`].
pub struct NodeActorState {
    /// Who the maintenance is (its name, uid and node) and the ports its operations use,
    /// shared with every operation; set once at start (only the deletion flag operations
    /// watch is raised, through [`OpCtx::deletion_seen`]).
    pub(super) ctx: OpCtx,
    /// The eviction actor, as this maintenance speaks to it.
    pub(super) evictions: EvictionLink,
    /// The NodeMaintenance as last seen, and whether it is known to be current.
    pub(super) nm: MaintenanceCopy,
    /// Where the maintenance stands (the drain's own state included).
    pub(super) stage: Stage,
    /// The status wanted and the status the API has; one write at a time.
    pub(super) status: StatusWriter,
    /// This drain's place in the pace the drains running at once share for their progress
    /// writes.
    pub(super) progress_pace: PaceSlot,
    /// The one operation that runs at a time, and whether to look again when it ends.
    pub(super) ops: OpRunner,
    /// Every task running cluster work for this actor: aborted and awaited when it stops.
    pub(super) tasks: TaskSet,
    /// When the next step may go: the failing steps' backoff, a paced start-up.
    pub(super) retry: StepRetry,
    /// When the running reconcile began, and whether the next must repair the node.
    pub(super) reconciles: Reconciles,
    /// The node lease: held since when, renewals, the pause of evictions.
    pub(super) lease: LeaseKeeper,
    /// The node, pod, lease and VM watches, and what they delivered.
    pub(super) watches: Watches,
    /// Which DaemonSets exist, as learned by reconciles and drain passes.
    pub(super) daemonsets: DaemonSets,
    /// Every timer of this actor: the retry tick, the hold's end ([`Wake::RetryDue`]), the
    /// lease keeper's, the drain deadline's, deferred status writes and re-subscriptions.
    pub(super) timers: Timers<NodeMsg>,
    /// The span log lines go to and work hangs under, whether the `maintenance` root has
    /// ended, and its ids for the traces that follow.
    pub(super) trace: TraceState,
    /// The phase last reported to the observer (withdrawn when the state is dropped).
    pub(super) observed_phase: PhaseReport,
    /// Whether the drain is blocked, as last reported to the observer (withdrawn likewise).
    pub(super) blocked_report: BlockedReport,
}

impl NodeActorState {
    pub(super) fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.ctx.config.now()
    }

    /// Starts the operation the stage calls for, or, while one runs, remembers to look again
    /// once it is done.
    pub(super) fn kick(&mut self, myself: &ActorRef<NodeMsg>) {
        if !self.ops.may_start() {
            return;
        }
        let facts = Facts {
            repair_due: self.reconciles.repair_due(),
            awaiting_pods: self.stage.drain().is_some_and(Drain::awaiting_pods)
                && self.watches.watching_pods(),
            failure_written: self
                .status
                .written()
                .is_some_and(super::status::undo_pending),
            lease_expiring: self.lease.paused(),
        };
        match next_op(&self.stage, facts) {
            None => {}
            Some(NextOp::Reconcile) => {
                self.reconciles.repairing();
                self.run_reconcile(myself);
            }
            Some(NextOp::DrainPass) => self.run_drain_pass(myself),
            Some(NextOp::Undo { finalizer }) => {
                self.stage.undo_started();
                let span = tracing::info_span!(parent: &self.work_span(), "undo");
                let ctx = self.ctx.clone();
                let input = UndoInput {
                    finalizer,
                    known: Known {
                        node: self.watches.last_node(),
                        lease: self.lease.surely_ours(tokio::time::Instant::now()),
                    },
                    finalizers: self.nm.seen().finalizers.clone(),
                    record: self.status.wanted().node_record.clone(),
                    untouched: Failure::recorded(self.status.wanted(), self.nm.seen())
                        == Failure::InvalidSpec,
                };
                self.start_op(myself, span, ops::undo(ctx, input), move |result| {
                    NodeMsg::Op(OpResult::Undone { finalizer, result })
                });
            }
        }
    }

    fn run_reconcile(&mut self, myself: &ActorRef<NodeMsg>) {
        // A maintenance that waited in the queue is Running but has no counts yet.
        let first_time = crate::fleet::awaiting_start(self.status.wanted());
        // The watches start with the reconcile: their first lists are the node it patches
        // and the pods it counts (no GET, no LIST of their own).
        let (cluster, node) = (self.ctx.cluster.as_ref(), &self.ctx.node_name);
        self.watches.watch_node(cluster, node, myself);
        if first_time {
            self.watches.watch_pods(cluster, node, myself);
        }
        let input = ReconcileInput {
            refresh: !self.nm.fresh(),
            finalizers: self.nm.seen().finalizers.clone(),
            first_time,
            known_daemonsets: self.daemonsets.clone(),
            node: self.watches.seen_node(),
            first_pods: if first_time {
                self.watches.first_pods()
            } else {
                None
            },
            record: self.status.wanted().node_record.clone(),
        };
        let span = tracing::info_span!(parent: &self.work_span(), "reconcile");
        let ctx = self.ctx.clone();
        self.reconciles.started();
        self.start_op(myself, span, ops::reconcile(ctx, input), |done| {
            NodeMsg::Op(OpResult::Reconciled(Box::new(done)))
        });
    }

    fn run_drain_pass(&mut self, myself: &ActorRef<NodeMsg>) {
        let Some(drain) = self.stage.drain() else {
            return;
        };
        let (snapshot, handled) = drain.next_pass();
        // A pass runs on pod changes that need a call and on every retry tick: no span of its own
        // (hours of a blocked drain would make thousands); what it does (deleting pods) is
        // recorded inside the drain's span.
        let span = drain.span().clone();
        self.ctx.config.observer.drain_pass();
        let work = ops::drain_pass(self.ctx.clone(), snapshot, self.daemonsets.clone(), handled);
        self.start_op(myself, span, work, |pass| {
            NodeMsg::Op(OpResult::Drained(pass))
        });
    }

    /// Starts `work` as the actor's one operation, reported to the observer as it starts (and,
    /// where its result is handled, as it ends).
    fn start_op<T, W, F>(
        &mut self,
        myself: &ActorRef<NodeMsg>,
        span: tracing::Span,
        work: W,
        into_msg: F,
    ) where
        T: Send + 'static,
        W: std::future::Future<Output = T> + Send + 'static,
        F: FnOnce(T) -> NodeMsg + Send + 'static,
    {
        self.ctx.config.observer.operation_started();
        self.ops.run(&mut self.tasks, myself, span, work, into_msg);
    }

    /// Writes the status if it differs from what the API has; one write at a time, news and
    /// progress coalesced. Nothing is written while undoing.
    pub(super) fn flush_status(&mut self, myself: &ActorRef<NodeMsg>) {
        if self.stage.is_undoing() {
            return;
        }
        let now = Instant::now();
        let wanted = self.status.wanted();
        self.progress_pace
            .draining(wanted.phase == Some(Phase::Running) && wanted.drain_start_time.is_some());
        let rate = self.ctx.config.eviction_rate_per_sec;
        let windows = Windows {
            news: self.ctx.config.status_coalesce,
            progress: self
                .progress_pace
                .window(self.ctx.config.progress_coalesce, rate),
        };
        match self.status.decide(now, windows) {
            Flush::Nothing => {}
            Flush::Later(after) => self.flush_status_after(now, after),
            Flush::Progress => match self.progress_pace.turn(now, rate) {
                Some(wait) => self.flush_status_after(now, wait),
                None => self.write_status_now(myself, now),
            },
            Flush::Now => {
                self.progress_pace.wrote();
                self.write_status_now(myself, now);
            }
        }
    }

    /// Flushes the status again `after` from `now`.
    fn flush_status_after(&mut self, now: Instant, after: std::time::Duration) {
        self.status.scheduled(now + after);
        // `decide` asks for a deferred write only sooner than the one scheduled (if any),
        // which this supersedes: the status writer knows of the soonest only.
        self.timers.set_unless_sooner(Wake::FlushStatus, after);
    }

    /// Writes the status the actor wants now.
    fn write_status_now(&mut self, myself: &ActorRef<NodeMsg>, now: Instant) {
        let wall = self.now();
        let (status, seen) = self.status.begin(now, wall);
        // Status writes are coalesced, so a span each stays cheap and shows when the
        // status said what.
        let span = tracing::info_span!(
            parent: &self.work_span(),
            "write_status",
            nmo.phase = status.phase.map(Phase::as_str).unwrap_or_default(),
            nmo.drain_progress = status.drain_progress,
        );
        if let Some(phase @ (Phase::Succeeded | Phase::Failed)) = status.phase {
            self.trace_phase(phase);
        }
        let cluster = self.ctx.cluster.clone();
        let (name, uid) = (self.ctx.nm_name.clone(), self.ctx.nm_uid.clone());
        self.tasks.spawn_cast_back(
            myself,
            span,
            async move { status_writer::write(cluster.as_ref(), &name, &uid, seen, status).await },
            NodeMsg::StatusWritten,
        );
    }

    /// Emits an event on the NodeMaintenance (best effort, in the background).
    pub(super) fn event(&mut self, type_: EventType, reason: &str, message: String) {
        let cluster = self.ctx.cluster.clone();
        let event = ops::nm_event(&self.ctx, type_, reason, message);
        let span = self.work_span();
        self.tasks
            .spawn(async move { ops::emit(&cluster, event).await }.instrument(span));
    }

    /// Moves to `next`. Leaving `Draining` ends the drain: its span says how, the pod watch
    /// stops and the eviction actor forgets the requests it still holds.
    pub(super) fn set_stage(&mut self, next: Stage) {
        let previous = std::mem::replace(&mut self.stage, next);
        if std::mem::discriminant(&previous) != std::mem::discriminant(&self.stage) {
            self.trace.span().in_scope(
                || tracing::debug!(from = %previous, to = %self.stage, "maintenance stage"),
            );
        }
        // Watches the new stage does not need stop (what they delivered stays, for the undo).
        if !decide::watches(&self.stage, WatchKind::Node) {
            self.watches.stop_node();
        }
        if !decide::watches(&self.stage, WatchKind::Pods) {
            self.watches.stop_pods();
        }
        if !decide::watches(&self.stage, WatchKind::Lease) {
            self.watches.stop_lease();
        }
        if let Stage::Draining(drain) = previous {
            // The deadline ends with its drain.
            self.timers.cancel(&Wake::DrainDeadline);
            self.watches.stop_pods();
            self.watches.stop_vms();
            self.blocked_report.set(None);
            self.status.drain_deadline(None, None);
            let how = match self.stage {
                Stage::Succeeded => DrainEnd::Drained,
                _ => DrainEnd::Stopped,
            };
            if drain.end(how, self.ctx.config.observer.as_ref()) {
                self.evictions.cancel_all();
            }
        }
    }

    /// The span the next piece of work hangs under (see [`TraceState::work_span`]).
    pub(super) fn work_span(&self) -> tracing::Span {
        self.trace.work_span(&self.ctx)
    }

    /// Follows a phase change in the traces (see [`TraceState::on_phase`]).
    pub(super) fn trace_phase(&mut self, phase: Phase) {
        self.trace
            .on_phase(phase, &self.ctx, &self.nm.seen().reason);
    }

    pub(super) fn note_phase(&mut self) {
        if self.stage.is_undoing() || !self.observed_phase.set(self.status.wanted().phase) {
            return;
        }
        if let Some(phase) = self.status.wanted().phase {
            self.trace.record_phase(phase);
            // A terminal phase ends the maintenance's trace once the status saying so is on
            // its way (see `flush_status`), so that write is part of the trace; a phase the
            // API already has (a restart) ends it now.
            let written = self.status.written().and_then(|w| w.phase) == Some(phase);
            if phase == Phase::Running || written {
                self.trace_phase(phase);
            }
        }
    }

    /// No longer driving this maintenance: the phase gauge forgets it.
    pub(super) fn forget_phase(&mut self) {
        self.observed_phase.set(None);
    }

    /// A step failed: the next retry waits out a backoff that grows with each failure in a
    /// row (with jitter), so that a failing API is not hammered by every maintenance at once.
    pub(super) fn step_failed(&mut self) {
        let config = &self.ctx.config;
        let (base, max) = (config.retry_backoff_base, config.retry_backoff_max);
        self.retry.failed(&mut self.timers, base, max);
    }

    /// A step went through: the next failure starts from the shortest backoff again.
    pub(super) fn step_succeeded(&mut self) {
        self.retry.succeeded();
    }

    /// The lease's margin before expiry at which evictions pause.
    pub(super) fn pause_margin(&self) -> std::time::Duration {
        decisions::eviction_pause_margin(self.ctx.config.lease_duration)
    }

    /// Deleted: from now on only the undo runs, in a trace of its own.
    pub(super) fn start_undo(&mut self, myself: &ActorRef<NodeMsg>) {
        if self.stage.is_undoing() {
            return;
        }
        // Log lines are emitted inside the span (not with `parent:`): JSON logs list the spans
        // entered, so that is how a line gets the maintenance's node and trace id.
        self.trace
            .span()
            .in_scope(|| tracing::info!("maintenance deleted, undoing"));
        self.note_phase();
        self.forget_phase();
        self.ctx.deletion_seen();
        // A deletion does not wait for a paced start-up or a backoff.
        self.retry.lift(&mut self.timers);
        self.set_stage(Stage::Undoing);
        // Ending maintenance is its own trace, linked to the maintenance's (see
        // [`TraceState::end`]).
        self.trace.end(&self.ctx);
        self.lease.stop_renewing(&mut self.timers);
        self.watches.stop_node();
        self.kick(myself);
    }
}
