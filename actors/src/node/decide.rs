//! The node actor's decisions, as pure functions of its stage and a few facts: the actor
//! reduces what it knows to these, asks here, then acts (kube-runtime's `FinalizerState` way:
//! one exhaustive `match` per decision).

use chrono::{DateTime, Utc};

use super::errors::{LeaseError, ReconcileError};
use super::messages::WatchKind;
use super::ops::ReconcileOutcome;
use super::stage::{Failure, Stage};
use crate::decisions::RecordFinding;
use crate::model::{Lease, Maintenance, NodeState};

/// An operation for the op runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NextOp {
    /// Start-up or repair: finalizer, counts, node, lease, cordon.
    Reconcile,
    /// Classify and delete pods, then ask for evictions.
    DrainPass,
    /// Take the node out of maintenance; with `finalizer`, release the NodeMaintenance too.
    Undo {
        /// Deleted (not only failed): remove the finalizer as well.
        finalizer: bool,
    },
}

/// What the node actor knows besides its stage, as far as the next operation depends on it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Facts {
    /// The Node drifted (someone uncordoned, untainted, unlabelled it).
    pub(super) repair_due: bool,
    /// The pod watch runs but has not delivered its first list yet.
    pub(super) awaiting_pods: bool,
    /// The API has the Failed status saying the undo is due (a give-up's undo starts only
    /// then, so a restart in between still undoes).
    pub(super) failure_written: bool,
    /// nmo's node lease is about to expire or has: no evictions (nor pod deletions) until it
    /// is renewed.
    pub(super) lease_expiring: bool,
}

/// The operation to run next, if any.
pub(super) fn next_op(stage: &Stage, facts: Facts) -> Option<NextOp> {
    match stage {
        Stage::Failed { undo_due: true, .. } if facts.failure_written => {
            Some(NextOp::Undo { finalizer: false })
        }
        Stage::Failed { .. } => None,
        Stage::Undoing => Some(NextOp::Undo { finalizer: true }),
        Stage::Starting | Stage::WaitingForLease { .. } => Some(NextOp::Reconcile),
        Stage::Draining(_) | Stage::Succeeded if facts.repair_due => Some(NextOp::Reconcile),
        // The pod watch's first list is on its way: no need to LIST as well.
        Stage::Draining(_) if facts.awaiting_pods => None,
        Stage::Draining(_) if facts.lease_expiring => None,
        Stage::Draining(_) => Some(NextOp::DrainPass),
        Stage::Succeeded => None,
    }
}

/// A retry tick re-runs unfinished work in these stages.
pub(super) fn retries_on_tick(stage: &Stage) -> bool {
    match stage {
        Stage::Starting | Stage::WaitingForLease { .. } | Stage::Draining(_) | Stage::Undoing => {
            true
        }
        Stage::Failed { undo_due, .. } => *undo_due,
        Stage::Succeeded => false,
    }
}

/// Whether an ended watch is wanted again in this stage.
pub(super) fn resubscribes(stage: &Stage, kind: WatchKind) -> bool {
    watches(stage, kind)
}

/// Whether a watch runs in this stage. The Node is watched from the start (its first list is
/// what the reconcile patches, and every retry while waiting for the lease reads it) for as
/// long as nmo guards it; the pods from the start (the first counts) through the drain; the
/// lease while nmo keeps it (it starts once the lease is held).
pub(super) fn watches(stage: &Stage, kind: WatchKind) -> bool {
    match (kind, stage) {
        (WatchKind::Node, Stage::Starting | Stage::WaitingForLease { .. }) => true,
        (WatchKind::Node, _) => stage.guards_node(),
        (WatchKind::Pods, Stage::Starting | Stage::Draining(_)) => true,
        (WatchKind::Pods, _) => false,
        (WatchKind::Lease, _) => stage.keeps_lease(),
        (WatchKind::Vms, Stage::Draining(_)) => true,
        (WatchKind::Vms, _) => false,
    }
}

/// What a changed NodeMaintenance means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OnUpdate {
    /// Deleted: undo.
    Undo,
    /// Failed for a missing node and its spec changed: start again.
    Restart,
    /// Keep going with the new reason and finalizers.
    Continue,
}

/// Decides what a changed NodeMaintenance means in `stage`.
pub(super) fn on_update(stage: &Stage, nm: &Maintenance) -> OnUpdate {
    match stage {
        _ if nm.deleting => OnUpdate::Undo,
        Stage::Failed {
            why: Failure::NodeMissing { reason },
            ..
        } if *reason != nm.reason => OnUpdate::Restart,
        // Its spec was put right (a shorter reason, a valid drain timeout).
        Stage::Failed {
            why: Failure::InvalidSpec,
            ..
        } if nm.invalid.is_none() => OnUpdate::Restart,
        _ => OnUpdate::Continue,
    }
}

/// What a reconcile's result means.
// Built once per reconcile and consumed at once: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(super) enum AfterReconcile {
    /// Lease held, node in maintenance: drain, or keep guarding a drained node.
    Ready {
        /// The node as written.
        node: NodeState,
        /// Our lease.
        lease: Lease,
        /// What was wrong with the record found on the node, and replaced.
        finding: Option<RecordFinding>,
    },
    /// The node does not exist: fail (the error says so).
    NodeMissing(ReconcileError),
    /// Someone else holds the lease and it was never ours: wait, touching nothing.
    WaitForLease {
        /// Their identity.
        holder: String,
        /// When their lease expires.
        until: Option<DateTime<Utc>>,
    },
    /// The lease was ours once and could not be taken again: counts toward giving up.
    LeaseFailed(LeaseError),
    /// Taking the lease failed before it was ever ours: said in `lastError`, not counted.
    NoLeaseYet(LeaseError),
    /// Another step failed: said in `lastError`, retried on the next tick.
    StepFailed(ReconcileError),
    /// The NodeMaintenance is gone: stop.
    Gone,
    /// Nothing was done.
    Nothing,
}

/// Decides what a reconcile's result means, given whether the lease was ever held.
pub(super) fn after_reconcile(
    outcome: Result<ReconcileOutcome, ReconcileError>,
    lease_held_once: bool,
) -> AfterReconcile {
    match outcome {
        Ok(ReconcileOutcome::Ready {
            node,
            lease,
            finding,
        }) => AfterReconcile::Ready {
            node,
            lease,
            finding,
        },
        Ok(ReconcileOutcome::Gone) => AfterReconcile::Gone,
        Ok(ReconcileOutcome::Skipped) => AfterReconcile::Nothing,
        Err(ReconcileError::Lease(err)) if lease_held_once => AfterReconcile::LeaseFailed(err),
        Err(ReconcileError::Lease(LeaseError::TakenBy { holder, until })) => {
            AfterReconcile::WaitForLease { holder, until }
        }
        Err(ReconcileError::Lease(err)) => AfterReconcile::NoLeaseYet(err),
        Err(err @ ReconcileError::NodeMissing { .. }) => AfterReconcile::NodeMissing(err),
        Err(err) => AfterReconcile::StepFailed(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::ClusterError;

    use super::super::stage::examples::{draining, failed};

    fn nm(reason: &str) -> Maintenance {
        Maintenance::test("nm1").on("n1").with_reason(reason)
    }

    #[test]
    fn the_next_operation_follows_the_stage() {
        let idle = Facts::default();
        let repair = Facts {
            repair_due: true,
            ..Facts::default()
        };
        let awaiting = Facts {
            awaiting_pods: true,
            ..Facts::default()
        };
        assert_eq!(next_op(&Stage::Starting, idle), Some(NextOp::Reconcile));
        let waiting = Stage::WaitingForLease {
            holder: "x".into(),
            until: None,
        };
        assert_eq!(next_op(&waiting, idle), Some(NextOp::Reconcile));
        assert_eq!(next_op(&draining(), idle), Some(NextOp::DrainPass));
        assert_eq!(next_op(&draining(), awaiting), None);
        assert_eq!(next_op(&draining(), repair), Some(NextOp::Reconcile));
        assert_eq!(next_op(&Stage::Succeeded, idle), None);
        assert_eq!(next_op(&Stage::Succeeded, repair), Some(NextOp::Reconcile));
        let written = Facts {
            failure_written: true,
            ..Facts::default()
        };
        assert_eq!(
            next_op(&failed(true), written),
            Some(NextOp::Undo { finalizer: false })
        );
        assert_eq!(
            next_op(&failed(true), idle),
            None,
            "a give-up undoes only once the API says Failed with the undo due"
        );
        let expiring = Facts {
            lease_expiring: true,
            ..Facts::default()
        };
        assert_eq!(
            next_op(&draining(), expiring),
            None,
            "no evictions without the lease"
        );
        assert_eq!(
            next_op(&Stage::Undoing, expiring),
            Some(NextOp::Undo { finalizer: true })
        );
        assert_eq!(
            next_op(&failed(false), repair),
            None,
            "Failed touches nothing"
        );
        assert_eq!(
            next_op(&Stage::Undoing, repair),
            Some(NextOp::Undo { finalizer: true })
        );
    }

    #[test]
    fn ticks_retry_unfinished_work_only() {
        assert!(retries_on_tick(&Stage::Starting));
        assert!(retries_on_tick(&draining()));
        assert!(retries_on_tick(&Stage::Undoing));
        assert!(retries_on_tick(&failed(true)));
        assert!(!retries_on_tick(&failed(false)));
        assert!(!retries_on_tick(&Stage::Succeeded));
    }

    #[test]
    fn watches_come_back_only_where_they_are_needed() {
        assert!(resubscribes(&Stage::Succeeded, WatchKind::Node));
        assert!(!resubscribes(&Stage::Succeeded, WatchKind::Pods));
        assert!(resubscribes(&draining(), WatchKind::Pods));
        assert!(!resubscribes(&Stage::Undoing, WatchKind::Node));
        assert!(resubscribes(&Stage::Starting, WatchKind::Node));
        assert!(resubscribes(&Stage::Starting, WatchKind::Pods));
        let waiting = Stage::WaitingForLease {
            holder: "other".into(),
            until: None,
        };
        assert!(resubscribes(&waiting, WatchKind::Node));
        assert!(!resubscribes(&waiting, WatchKind::Pods));
        let failed = Stage::Failed {
            why: Failure::LeaseLost,
            undo_due: true,
        };
        assert!(!resubscribes(&failed, WatchKind::Node));
        assert!(!resubscribes(&failed, WatchKind::Pods));
    }

    #[test]
    fn a_missing_node_failure_restarts_on_a_spec_change_and_deletion_wins() {
        let stage = Stage::Failed {
            why: Failure::NodeMissing {
                reason: "old".into(),
            },
            undo_due: false,
        };
        assert_eq!(on_update(&stage, &nm("old")), OnUpdate::Continue);
        assert_eq!(on_update(&stage, &nm("new")), OnUpdate::Restart);
        assert_eq!(on_update(&failed(false), &nm("new")), OnUpdate::Continue);
        let mut deleted = nm("new");
        deleted.deleting = true;
        assert_eq!(on_update(&stage, &deleted), OnUpdate::Undo);
    }

    #[test]
    fn lease_trouble_counts_only_once_the_lease_was_held() {
        let taken = || {
            Err(ReconcileError::Lease(LeaseError::TakenBy {
                holder: "nhc".into(),
                until: None,
            }))
        };
        assert!(matches!(
            after_reconcile(taken(), false),
            AfterReconcile::WaitForLease { .. }
        ));
        assert!(matches!(
            after_reconcile(taken(), true),
            AfterReconcile::LeaseFailed(LeaseError::TakenBy { .. })
        ));
        let api = || {
            Err(ReconcileError::Lease(LeaseError::Take(
                ClusterError::Transient("t".into()),
            )))
        };
        assert!(matches!(
            after_reconcile(api(), false),
            AfterReconcile::NoLeaseYet(_)
        ));
        assert!(matches!(
            after_reconcile(api(), true),
            AfterReconcile::LeaseFailed(_)
        ));
    }

    #[test]
    fn other_outcomes_map_one_to_one() {
        let missing = Err(ReconcileError::NodeMissing { node: "n1".into() });
        assert!(matches!(
            after_reconcile(missing, true),
            AfterReconcile::NodeMissing(_)
        ));
        let cordon = Err(ReconcileError::Cordon(ClusterError::Conflict("c".into())));
        assert!(matches!(
            after_reconcile(cordon, true),
            AfterReconcile::StepFailed(_)
        ));
        assert!(matches!(
            after_reconcile(Ok(ReconcileOutcome::Gone), false),
            AfterReconcile::Gone
        ));
        assert!(matches!(
            after_reconcile(Ok(ReconcileOutcome::Skipped), false),
            AfterReconcile::Nothing
        ));
    }
}
