//! What the status of a waiting maintenance says, and how starting changes it.

use chrono::{DateTime, Utc};

use super::admission::Waiting;
use crate::decisions;
use crate::model::{ConditionStatus, MaintenanceStatus, Phase, QueuePlace, conditions};

/// True while the maintenance has not started: no phase yet, or waiting in the queue (the
/// first-time counts are still to be taken).
pub fn awaiting_start(status: &MaintenanceStatus) -> bool {
    status.phase.is_none()
        || decisions::condition(status, conditions::QUEUED)
            .is_some_and(|c| c.status == ConditionStatus::True)
}

/// Waiting for the budget: `phase: Running` (as NMO reports a maintenance it has not finished),
/// its place in `queue`, and a `Queued` condition saying what it waits for.
pub fn mark_queued(status: &mut MaintenanceStatus, waiting: &Waiting, now: DateTime<Utc>) {
    status.phase = Some(Phase::Running);
    status.queue = Some(QueuePlace {
        position: waiting.position,
        waiting_for: waiting.reason.short(),
    });
    let message = format!(
        "position {} in the maintenance queue, {}; nothing on the node is touched until it starts",
        waiting.position, waiting.reason
    );
    decisions::set_condition(
        &mut status.conditions,
        conditions::QUEUED,
        true,
        conditions::WAITING_FOR_BUDGET,
        &message,
        now,
    );
    status.last_update = Some(now);
}

/// Started: out of the queue. The `Queued` condition, if the maintenance ever waited, turns
/// False (so "it waited" stays visible); one that never waited gets none.
pub fn mark_started(status: &mut MaintenanceStatus, now: DateTime<Utc>) {
    status.queue = None;
    if decisions::condition(status, conditions::QUEUED).is_some() {
        decisions::set_condition(
            &mut status.conditions,
            conditions::QUEUED,
            false,
            conditions::STARTED,
            "the cluster maintenance budget let this maintenance start",
            now,
        );
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::fleet::{Limit, WaitReason};

    fn now() -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000, 0).single().unwrap()
    }

    fn third() -> Waiting {
        Waiting {
            name: "nm-3".into(),
            position: 3,
            reason: WaitReason::Parallel {
                running: 2,
                limit: 2,
                setting: Limit::Count(2),
            },
        }
    }

    #[test]
    fn a_queued_maintenance_is_running_and_says_where_it_waits() {
        let mut status = MaintenanceStatus::default();
        assert!(awaiting_start(&status));
        mark_queued(&mut status, &third(), now());
        assert_eq!(status.phase, Some(Phase::Running));
        assert_eq!(
            status.queue,
            Some(QueuePlace {
                position: 3,
                waiting_for: "max-parallel-maintenances: 2 of 2 running".into()
            })
        );
        let queued = decisions::condition(&status, conditions::QUEUED).unwrap();
        assert_eq!(
            (queued.status.as_str(), queued.reason.as_str()),
            ("True", conditions::WAITING_FOR_BUDGET)
        );
        assert!(
            queued.message.starts_with(
                "position 3 in the maintenance queue, waiting for --max-parallel-maintenances (2)"
            ),
            "{}",
            queued.message
        );
        assert!(awaiting_start(&status), "Running, but not started");
        assert_eq!(status.last_error, None, "waiting is not an error");
    }

    #[test]
    fn starting_clears_the_place_and_keeps_the_condition_false() {
        let mut status = MaintenanceStatus::default();
        mark_queued(&mut status, &third(), now());
        mark_started(&mut status, now());
        assert_eq!(status.queue, None);
        let queued = decisions::condition(&status, conditions::QUEUED).unwrap();
        assert_eq!(
            (queued.status.as_str(), queued.reason.as_str()),
            ("False", conditions::STARTED)
        );
        assert!(!awaiting_start(&status));
    }

    #[test]
    fn a_maintenance_that_never_waited_gets_no_queued_condition() {
        let mut status = MaintenanceStatus {
            phase: Some(Phase::Running),
            ..MaintenanceStatus::default()
        };
        assert!(!awaiting_start(&status), "NMO's Running status: started");
        mark_started(&mut status, now());
        assert!(decisions::condition(&status, conditions::QUEUED).is_none());
    }
}
