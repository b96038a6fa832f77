//! The node actor's drain policy: the opt-in deadline (`spec.drainTimeout`, `Hold` or `Undo`
//! when it passes) and what it makes known when its drain is blocked (an event once per change
//! of the blocker's class, the observer's metric). The decisions are in [`super::drain_deadline`]
//! and [`super::blocked`].

use chrono::{DateTime, Utc};
use ractor::ActorRef;

use super::drain::Drain;
use super::drain_deadline::{DrainDeadline, deadline, go_duration, remaining_text};
use super::messages::{NodeMsg, Wake};
use super::stage::{Failure, Stage};
use super::state::NodeActorState;
use crate::model::{EventType, OnDrainTimeout, reasons};

impl NodeActorState {
    /// (Re)computes the deadline of the drain under way from `status.drainStartTime` and
    /// `spec.drainTimeout` (after a restart too), and sets its timer. No timeout: no deadline.
    /// The wall clock is read once, here: from then on the monotonic clock times it (see
    /// [`DrainDeadline`]).
    pub(super) fn arm_deadline(&mut self) {
        let now = self.now();
        let timeout = self.nm.seen().drain_policy.timeout;
        let start = self.status.wanted().drain_start_time.unwrap_or(now);
        let Some(drain) = self.stage.drain_mut() else {
            return;
        };
        let due = match timeout {
            Some(t) => Some(DrainDeadline::arm(
                deadline(start, t),
                now,
                &mut self.timers,
            )),
            None => {
                // The timer of an earlier deadline (if any) goes with it.
                self.timers.cancel(&Wake::DrainDeadline);
                None
            }
        };
        drain.set_deadline(due);
        let due = drain.deadline();
        self.status.drain_deadline(
            due.map(DrainDeadline::wall),
            due.map(|due| remaining_text(due.left())),
        );
    }

    /// Looks at the deadline: passed, the drain stops (true); else the time left in the status
    /// is refreshed.
    pub(super) fn check_deadline(&mut self, myself: &ActorRef<NodeMsg>) -> bool {
        let Some(due) = self.stage.drain().and_then(Drain::deadline) else {
            return false;
        };
        if !due.passed() {
            self.status.time_left(remaining_text(due.left()));
            return false;
        }
        let now = self.now();
        self.time_out(myself, now);
        true
    }

    /// The deadline passed: Failed, naming what blocked the drain; with `Undo`, the maintenance
    /// is undone as after losing the lease, with `Hold` the node stays cordoned for a person.
    /// Pods are never deleted for it: the eviction actor forgets this drain's requests.
    fn time_out(&mut self, myself: &ActorRef<NodeMsg>, now: DateTime<Utc>) {
        let Some(drain) = self.stage.drain() else {
            return;
        };
        let what = match drain.blocker() {
            Some((pod, blocker)) => format!("pod {}/{}: {blocker}", pod.namespace, pod.name),
            None => format!("{} pods still on the node", drain.pending_count()),
        };
        let timeout = self
            .nm
            .seen()
            .drain_policy
            .timeout
            .map(go_duration)
            .unwrap_or_default();
        let policy = self.nm.seen().drain_policy.on_timeout;
        let then = match policy {
            OnDrainTimeout::Hold => "the node stays cordoned (onDrainTimeout: Hold)",
            OnDrainTimeout::Undo => "the maintenance is undone (onDrainTimeout: Undo)",
        };
        let error = format!("drain did not finish within drainTimeout {timeout}; {then}; {what}");
        self.trace
            .span()
            .in_scope(|| tracing::warn!(%error, "drain deadline passed"));
        self.set_stage(Stage::Failed {
            why: Failure::DrainTimeout {
                held: policy == OnDrainTimeout::Hold,
            },
            undo_due: policy == OnDrainTimeout::Undo,
        });
        if policy == OnDrainTimeout::Undo {
            self.lease.stop_renewing(&mut self.timers);
            self.watches.stop_node();
        }
        self.status.drain_timed_out(error.clone(), now);
        if policy == OnDrainTimeout::Undo {
            // As after losing the lease: the undo runs once the API says it is due, so a
            // restart in between still undoes.
            self.status.undo_due(now);
        }
        self.event(EventType::Warning, reasons::FAILED, error);
        self.flush_status(myself);
        self.kick(myself);
    }

    /// Takes in what blocks the drain now: the observer hears of every change (metric), an
    /// event says it once per change of class.
    pub(super) fn note_blockage(&mut self, now: DateTime<Utc>) {
        let Some(drain) = self.stage.drain_mut() else {
            return;
        };
        let change = drain.note_blockage(now);
        if change.changed {
            self.blocked_report.set(change.now);
        }
        if !change.announce {
            return;
        }
        let Some((pod, blocker)) = drain.blocker() else {
            return;
        };
        let type_ = if blocker.needs_a_person() {
            EventType::Warning
        } else {
            EventType::Normal
        };
        let message = format!(
            "Drain of node {} blocked ({}): pod {}/{}: {blocker}",
            self.ctx.node_name,
            blocker.reason(),
            pod.namespace,
            pod.name
        );
        self.event(type_, reasons::DRAIN_BLOCKED, message);
    }
}
