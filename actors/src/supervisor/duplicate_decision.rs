//! A second NodeMaintenance for a node another one already drives: it is marked Failed with a
//! reason naming the active one and never touches the node; deleting it only releases its
//! finalizer. Decided here (pure), carried out by the supervisor through its op runner.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::decisions;
use crate::model::{
    ConditionStatus, Event, EventTarget, EventType, Maintenance, MaintenanceName,
    MaintenanceStatus, Phase, StatusPrecondition, conditions, reasons,
};
use crate::ports::{Cluster, ClusterError};

/// True for a NodeMaintenance already marked as a duplicate (it stays out of the node's way
/// for good, also after a restart).
pub(super) fn is_marked(nm: &Maintenance) -> bool {
    nm.status.as_ref().is_some_and(|s| {
        s.phase == Some(Phase::Failed)
            && decisions::condition(s, conditions::DUPLICATE)
                .is_some_and(|c| c.status == ConditionStatus::True)
    })
}

/// What to do about a duplicate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum DuplicateAction {
    /// Nothing (already marked, or deleted without our finalizer).
    Nothing,
    /// Deleted: release its finalizer (nothing of ours is on the node for it).
    ReleaseFinalizer,
    /// Mark it Failed: add the finalizer if missing, write `status`, emit a Warning saying
    /// `error`.
    MarkFailed {
        /// The finalizer is missing.
        add_finalizer: bool,
        /// The status to write.
        status: Box<MaintenanceStatus>,
        /// Why it is ignored (also the event's message).
        error: String,
    },
}

/// Decides what to do about `nm`, a duplicate of the NodeMaintenance `active`.
pub(super) fn decide(
    nm: &Maintenance,
    active: &MaintenanceName,
    now: DateTime<Utc>,
) -> DuplicateAction {
    if nm.deleting {
        return if nm.has_finalizer() {
            DuplicateAction::ReleaseFinalizer
        } else {
            DuplicateAction::Nothing
        };
    }
    if is_marked(nm) {
        return DuplicateAction::Nothing;
    }
    let error = format!(
        "NodeMaintenance {active} already drives node {}; this one is ignored",
        nm.node_name
    );
    let mut status = nm.status.clone().unwrap_or_default();
    status.phase = Some(Phase::Failed);
    status.last_error = Some(error.clone());
    status.last_update = Some(now);
    decisions::set_condition(
        &mut status.conditions,
        conditions::DUPLICATE,
        true,
        conditions::DUPLICATE,
        &error,
        now,
    );
    DuplicateAction::MarkFailed {
        add_finalizer: !nm.has_finalizer(),
        status: Box::new(status),
        error,
    }
}

/// Handling a duplicate failed (tried again when it changes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DuplicateError {
    /// Releasing the finalizer of a deleted duplicate failed.
    #[error("cannot remove finalizer: {0}")]
    RemoveFinalizer(#[source] ClusterError),
    /// Adding the finalizer failed.
    #[error("cannot add finalizer: {0}")]
    AddFinalizer(#[source] ClusterError),
    /// Writing the Failed status failed.
    #[error("cannot mark duplicate: {0}")]
    MarkFailed(#[source] ClusterError),
}

/// Carries out `action` for `nm`.
pub(super) async fn carry_out(
    cluster: Arc<dyn Cluster>,
    nm: Maintenance,
    action: DuplicateAction,
) -> Result<(), DuplicateError> {
    match action {
        DuplicateAction::Nothing => Ok(()),
        DuplicateAction::ReleaseFinalizer => cluster
            .remove_finalizer(&nm.name, &nm.uid, &nm.finalizers)
            .await
            .map_err(DuplicateError::RemoveFinalizer),
        DuplicateAction::MarkFailed {
            add_finalizer,
            status,
            error,
        } => {
            if add_finalizer {
                cluster
                    .add_finalizer(&nm.name, &nm.finalizers)
                    .await
                    .map_err(DuplicateError::AddFinalizer)?;
            }
            let seen = StatusPrecondition::over(nm.status.as_ref());
            cluster
                .write_status(&nm.name, &nm.uid, seen, &status)
                .await
                .map_err(DuplicateError::MarkFailed)?;
            let event = Event {
                target: EventTarget::Maintenance {
                    name: nm.name.clone(),
                    uid: nm.uid.clone(),
                },
                type_: EventType::Warning,
                reason: reasons::FAILED.to_string(),
                message: error,
            };
            // Events are best effort.
            if let Err(err) = cluster.emit_event(&event).await {
                tracing::warn!(maintenance = %nm.name, error = %err, "cannot emit event");
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::model::FINALIZER;

    fn now() -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000, 0).single().unwrap()
    }

    fn nm() -> Maintenance {
        Maintenance::test("second").on("n1").created_at(now())
    }

    #[test]
    fn a_duplicate_is_marked_failed_naming_the_active_one() {
        let DuplicateAction::MarkFailed {
            add_finalizer,
            status,
            error,
        } = decide(&nm(), &"first".into(), now())
        else {
            panic!("expected MarkFailed");
        };
        assert!(add_finalizer);
        assert_eq!(
            error,
            "NodeMaintenance first already drives node n1; this one is ignored"
        );
        assert_eq!(status.phase, Some(Phase::Failed));
        assert_eq!(status.last_error.as_deref(), Some(error.as_str()));
        assert_eq!(status.last_update, Some(now()));
        let marked = Maintenance {
            status: Some(*status),
            ..nm()
        };
        assert!(is_marked(&marked));
        assert_eq!(
            decide(&marked, &"first".into(), now()),
            DuplicateAction::Nothing
        );
    }

    #[test]
    fn a_deleted_duplicate_only_releases_its_finalizer() {
        let deleted = Maintenance {
            deleting: true,
            finalizers: vec![FINALIZER.into()],
            ..nm()
        };
        assert_eq!(
            decide(&deleted, &"first".into(), now()),
            DuplicateAction::ReleaseFinalizer
        );
        let released = Maintenance {
            finalizers: vec![],
            ..deleted
        };
        assert_eq!(
            decide(&released, &"first".into(), now()),
            DuplicateAction::Nothing
        );
    }

    #[test]
    fn a_duplicate_with_the_finalizer_keeps_it() {
        let finalized = Maintenance {
            finalizers: vec![FINALIZER.into()],
            ..nm()
        };
        assert!(matches!(
            decide(&finalized, &"first".into(), now()),
            DuplicateAction::MarkFailed {
                add_finalizer: false,
                ..
            }
        ));
    }
}
