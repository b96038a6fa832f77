//! Where a maintenance stands, with the data of each stage. The decisions made from it are in
//! [`super::decide`].

use std::fmt;

use chrono::{DateTime, Utc};

use super::drain::Drain;
use super::errors::ReconcileError;
use crate::decisions;
use crate::model::{FailureKind, Maintenance, MaintenanceStatus, conditions};

/// The stage of a maintenance.
#[derive(Debug)]
pub(super) enum Stage {
    /// Finalizer, first status, node, lease, cordon: not all done yet (retried every tick).
    Starting,
    /// Someone else holds a valid lease: nothing is touched; looked at again every tick.
    WaitingForLease {
        /// Their holder identity.
        holder: String,
        /// When their lease expires, if known.
        until: Option<DateTime<Utc>>,
    },
    /// Cordoned; pods being removed.
    Draining(Box<Drain>),
    /// Drained; guarding the node (drift, lease).
    Succeeded,
    /// Gave up; waits for the deletion (or, for a missing node, a spec change).
    Failed {
        /// Why.
        why: Failure,
        /// The node's changes are still to be undone (after losing the lease).
        undo_due: bool,
    },
    /// Deleted: undoing, then the actor stops. Nothing leads out of it.
    Undoing,
}

/// Why a maintenance failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Failure {
    /// The node does not exist; started again once `spec.reason` differs from `reason`.
    NodeMissing {
        /// `spec.reason` when it failed.
        reason: String,
    },
    /// The lease could not be kept (`errorOnLeaseCount` above the limit).
    LeaseLost,
    /// `spec.drainTimeout` passed before the drain finished.
    DrainTimeout {
        /// The node stays out for a person (`onDrainTimeout: Hold`), its lease renewed; false
        /// once it is (to be) undone (`Undo`).
        held: bool,
    },
    /// The spec breaks the limits the CRD's schema sets (an object created before it had
    /// them): Failed before anything was touched, so its deletion undoes nothing.
    InvalidSpec,
    /// Found Failed in the API: decided by an earlier run.
    Recorded,
}

impl Failure {
    /// The failure a status found Failed in the API records, from what it says (so after a
    /// restart or a leader handover too): its kind, the reason of its `Drained` condition (one
    /// failed for a missing node is started again when its spec changes; one whose drain timed
    /// out is held unless its node is (to be) given back). A status written by an older nmo
    /// names no kind (its reason is `Failed`): one failed for a missing node or an invalid
    /// spec is recognised by its `lastError` then, as that nmo did.
    pub(super) fn recorded(status: &MaintenanceStatus, nm: &Maintenance) -> Self {
        // A give-up's undo is due or done: the node is not held.
        let given_back = decisions::condition(status, conditions::NODE_RESTORED).is_some();
        match super::status::failure_kind(status) {
            Some(FailureKind::NodeMissing) => Failure::NodeMissing {
                reason: nm.reason.clone(),
            },
            Some(FailureKind::LeaseLost) => Failure::LeaseLost,
            Some(FailureKind::DrainTimeout) => Failure::DrainTimeout { held: !given_back },
            Some(FailureKind::InvalidSpec) => Failure::InvalidSpec,
            None => Self::recorded_by_older(status, nm, given_back),
        }
    }

    /// [`Self::recorded`] for a status that names no kind.
    fn recorded_by_older(status: &MaintenanceStatus, nm: &Maintenance, given_back: bool) -> Self {
        let missing = ReconcileError::NodeMissing {
            node: nm.node_name.clone(),
        };
        let timed_out = decisions::condition(status, conditions::DRAINED)
            .is_some_and(|c| c.reason == conditions::DRAIN_TIMEOUT);
        let invalid = nm.invalid.as_ref().map(|problem| problem.message.as_str());
        if invalid.is_some() && status.last_error.as_deref() == invalid {
            Failure::InvalidSpec
        } else if status.last_error.as_deref() == Some(missing.to_string().as_str()) {
            Failure::NodeMissing {
                reason: nm.reason.clone(),
            }
        } else if timed_out {
            Failure::DrainTimeout { held: !given_back }
        } else {
            Failure::Recorded
        }
    }
}

impl Stage {
    /// The node is in maintenance and ours: the lease is renewed and drift repaired.
    pub(super) fn guards_node(&self) -> bool {
        matches!(self, Stage::Draining(_) | Stage::Succeeded)
    }

    /// nmo's node lease is renewed: while it guards the node, and while a drain that passed
    /// its deadline holds the node out for a person (`onDrainTimeout: Hold`), so that no other
    /// operator takes over a node nmo still keeps cordoned.
    pub(super) fn keeps_lease(&self) -> bool {
        self.guards_node()
            || matches!(
                self,
                Stage::Failed {
                    why: Failure::DrainTimeout { held: true },
                    undo_due: false
                }
            )
    }

    /// A give-up's undo starts: not due again unless it fails.
    pub(super) fn undo_started(&mut self) {
        if let Stage::Failed { undo_due, .. } = self {
            *undo_due = false;
        }
    }

    /// A give-up's undo failed: due again (retried after the backoff, like the deletion's
    /// undo).
    pub(super) fn undo_failed(&mut self) {
        if let Stage::Failed { undo_due, .. } = self {
            *undo_due = true;
        }
    }

    /// Deleted: undoing.
    pub(super) fn is_undoing(&self) -> bool {
        matches!(self, Stage::Undoing)
    }

    /// The drain, while draining.
    pub(super) fn drain_mut(&mut self) -> Option<&mut Drain> {
        match self {
            Stage::Draining(drain) => Some(drain),
            _ => None,
        }
    }

    /// The drain, while draining.
    pub(super) fn drain(&self) -> Option<&Drain> {
        match self {
            Stage::Draining(drain) => Some(drain),
            _ => None,
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stage::Starting => f.write_str("starting"),
            Stage::WaitingForLease { holder, until } => {
                write!(f, "waiting for the lease held by {holder}")?;
                match until {
                    Some(until) => write!(f, " until {}", until.to_rfc3339()),
                    None => Ok(()),
                }
            }
            Stage::Draining(_) => f.write_str("draining"),
            Stage::Succeeded => f.write_str("succeeded"),
            Stage::Failed { why, undo_due } => {
                let why = match why {
                    Failure::NodeMissing { .. } => "node missing",
                    Failure::LeaseLost => "lease lost",
                    Failure::DrainTimeout { held: true } => "drain timeout, held",
                    Failure::DrainTimeout { held: false } => "drain timeout",
                    Failure::InvalidSpec => "invalid spec",
                    Failure::Recorded => "recorded",
                };
                let undo = if *undo_due { ", undo due" } else { "" };
                write!(f, "failed ({why}{undo})")
            }
            Stage::Undoing => f.write_str("undoing"),
        }
    }
}

/// Stages for the unit tests of this module and of `decide`.
#[cfg(test)]
pub(super) mod examples {
    use super::{Drain, Failure, Stage};

    pub fn failed(undo_due: bool) -> Stage {
        Stage::Failed {
            why: Failure::LeaseLost,
            undo_due,
        }
    }

    pub fn draining() -> Stage {
        Stage::Draining(Box::new(Drain::begin(&tracing::Span::none(), 0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::examples::{draining, failed};

    fn nm(reason: &str) -> Maintenance {
        Maintenance::test("nm1").on("n1").with_reason(reason)
    }

    #[test]
    fn stages_read_as_words() {
        let waiting = Stage::WaitingForLease {
            holder: "node-healthcheck".into(),
            until: Some(DateTime::<Utc>::UNIX_EPOCH),
        };
        assert_eq!(
            waiting.to_string(),
            "waiting for the lease held by node-healthcheck until 1970-01-01T00:00:00+00:00"
        );
        assert_eq!(failed(true).to_string(), "failed (lease lost, undo due)");
        assert_eq!(draining().to_string(), "draining");
    }

    fn failed_with(last_error: Option<&str>) -> MaintenanceStatus {
        MaintenanceStatus {
            last_error: last_error.map(str::to_string),
            ..MaintenanceStatus::default()
        }
    }

    #[test]
    fn a_recorded_failure_for_a_missing_node_is_recognised() {
        let nm = nm("r");
        assert_eq!(
            Failure::recorded(&failed_with(Some("node n1 not found")), &nm),
            Failure::NodeMissing { reason: "r".into() }
        );
        assert_eq!(
            Failure::recorded(
                &failed_with(Some("failed to extend lease owned by us: x")),
                &nm
            ),
            Failure::Recorded
        );
        assert_eq!(
            Failure::recorded(&failed_with(None), &nm),
            Failure::Recorded
        );
    }

    /// A Failed status as this nmo writes it: the kind in the reason of `Drained`.
    fn failed_as(reason: &str, last_error: &str) -> MaintenanceStatus {
        let mut status = failed_with(Some(last_error));
        status.phase = Some(crate::model::Phase::Failed);
        decisions::set_condition(
            &mut status.conditions,
            conditions::DRAINED,
            false,
            reason,
            last_error,
            DateTime::<Utc>::UNIX_EPOCH,
        );
        status
    }

    #[test]
    fn a_recorded_failure_is_known_by_its_kind_whatever_its_last_error_says() {
        // After a restart, from what the API holds: the `lastError` may be worded otherwise
        // (another nmo version, an edit) or say something else since.
        let nm = nm("r").invalid(crate::model::SpecField::Reason, "spec.reason is too long");
        assert_eq!(
            Failure::recorded(&failed_as("NodeNotFound", "node n1 is gone"), &nm),
            Failure::NodeMissing { reason: "r".into() }
        );
        assert_eq!(
            Failure::recorded(&failed_as("InvalidSpec", "spec.reason: too long"), &nm),
            Failure::InvalidSpec
        );
        assert_eq!(
            Failure::recorded(&failed_as("LeaseLost", "lease gone"), &nm),
            Failure::LeaseLost
        );
        // Written by an older nmo (reason `Failed`): known by its `lastError`, as it was.
        assert_eq!(
            Failure::recorded(&failed_as("Failed", "node n1 not found"), &nm),
            Failure::NodeMissing { reason: "r".into() }
        );
        assert_eq!(
            Failure::recorded(&failed_as("Failed", "spec.reason is too long"), &nm),
            Failure::InvalidSpec
        );
    }

    #[test]
    fn a_recorded_drain_timeout_holds_the_node_unless_it_is_given_back() {
        let nm = nm("r");
        let now = DateTime::<Utc>::UNIX_EPOCH;
        let mut status = failed_with(Some("drain did not finish within drainTimeout 1m"));
        decisions::set_condition(
            &mut status.conditions,
            conditions::DRAINED,
            false,
            conditions::DRAIN_TIMEOUT,
            "x",
            now,
        );
        assert_eq!(
            Failure::recorded(&status, &nm),
            Failure::DrainTimeout { held: true }
        );
        decisions::set_condition(
            &mut status.conditions,
            conditions::NODE_RESTORED,
            false,
            conditions::UNDO_DUE,
            "x",
            now,
        );
        assert_eq!(
            Failure::recorded(&status, &nm),
            Failure::DrainTimeout { held: false }
        );
    }
}
