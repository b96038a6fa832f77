//! Status bookkeeping, and which of several NodeMaintenances for one node drives it.

use chrono::{DateTime, Utc};

use crate::model::{Condition, ConditionStatus, Maintenance, MaintenanceStatus};

/// Which of several NodeMaintenances for the same node drives it: the oldest by creation time,
/// ties broken by name.
pub fn driver<'a, I>(candidates: I) -> Option<&'a Maintenance>
where
    I: IntoIterator<Item = &'a Maintenance>,
{
    candidates
        .into_iter()
        .min_by(|a, b| (a.creation_timestamp, &a.name).cmp(&(b.creation_timestamp, &b.name)))
}

/// Sets a condition, keeping its transition time when the status value does not change.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: DateTime<Utc>,
) {
    let status = ConditionStatus::of(status);
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if existing.status != status {
            existing.last_transition_time = now;
            existing.status = status;
        }
        existing.reason = reason.to_string();
        existing.message = message.to_string();
        return;
    }
    conditions.push(Condition {
        type_: type_.to_string(),
        status,
        reason: reason.to_string(),
        message: message.to_string(),
        last_transition_time: now,
    });
}

/// The condition of a type, if present.
pub fn condition<'a>(status: &'a MaintenanceStatus, type_: &str) -> Option<&'a Condition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

/// True when two statuses differ in anything but `lastUpdate` and the revision (which change
/// with every write, so comparing them would make every tick a write).
pub fn status_differs(a: &MaintenanceStatus, b: &MaintenanceStatus) -> bool {
    // Field by field, without copying the status (this runs on every change of a drain);
    // destructured so that a new field cannot be forgotten here.
    let MaintenanceStatus {
        phase,
        drain_progress,
        last_update: _,
        last_error,
        pending_pods,
        pending_pods_refs,
        total_pods,
        eviction_pods,
        error_on_lease_count,
        conditions,
        pending_pods_reasons,
        drain_start_time,
        drain_deadline,
        drain_time_remaining,
        queue,
        // Stamped by each write, like `lastUpdate`.
        revision: _,
        node_record,
    } = a;
    *phase != b.phase
        || *drain_progress != b.drain_progress
        || *last_error != b.last_error
        || *pending_pods != b.pending_pods
        || *pending_pods_refs != b.pending_pods_refs
        || *total_pods != b.total_pods
        || *eviction_pods != b.eviction_pods
        || *error_on_lease_count != b.error_on_lease_count
        || *conditions != b.conditions
        || *pending_pods_reasons != b.pending_pods_reasons
        || *drain_start_time != b.drain_start_time
        || *drain_deadline != b.drain_deadline
        || *drain_time_remaining != b.drain_time_remaining
        || *queue != b.queue
        || *node_record != b.node_record
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::at as t;

    fn nm(name: &str, created: i64) -> Maintenance {
        Maintenance::test(name).on("n1").created_at(t(created))
    }

    #[test]
    fn statuses_differ_in_anything_but_the_last_update() {
        let a = MaintenanceStatus {
            drain_progress: 40,
            last_update: Some(t(0)),
            ..MaintenanceStatus::default()
        };
        let b = MaintenanceStatus {
            last_update: Some(t(9)),
            ..a.clone()
        };
        assert!(!status_differs(&a, &b));
        for changed in [
            MaintenanceStatus {
                drain_progress: 50,
                ..b.clone()
            },
            MaintenanceStatus {
                pending_pods: vec!["p".into()].into(),
                ..b.clone()
            },
            MaintenanceStatus {
                drain_time_remaining: Some("1m".into()),
                ..b.clone()
            },
            MaintenanceStatus {
                queue: Some(crate::model::QueuePlace {
                    position: 1,
                    waiting_for: "budget".into(),
                }),
                ..b.clone()
            },
        ] {
            assert!(status_differs(&changed, &a), "{changed:?}");
        }
    }

    #[test]
    fn older_maintenance_drives_and_name_breaks_ties() {
        let (a, b, c) = (nm("b-old", 0), nm("a-new", 10), nm("a-old", 0));
        assert_eq!(driver([&b, &a]).unwrap().name, "b-old");
        assert_eq!(driver([&b, &a, &c]).unwrap().name, "a-old");
        assert!(driver(std::iter::empty()).is_none());
    }

    #[test]
    fn condition_transition_time_kept_when_status_unchanged() {
        let mut conds = Vec::new();
        set_condition(&mut conds, "Drained", false, "PodsPending", "3 left", t(0));
        set_condition(&mut conds, "Drained", false, "PodsPending", "2 left", t(5));
        assert_eq!(conds.len(), 1);
        assert_eq!(conds[0].last_transition_time, t(0));
        assert_eq!(conds[0].message, "2 left");
        set_condition(&mut conds, "Drained", true, "DrainComplete", "", t(9));
        assert_eq!(conds[0].last_transition_time, t(9));
        assert_eq!(conds[0].status, "True");
    }

    #[test]
    fn status_difference_ignores_last_update() {
        let a = MaintenanceStatus {
            last_update: Some(t(0)),
            ..Default::default()
        };
        let mut b = a.clone();
        b.last_update = Some(t(5));
        assert!(!status_differs(&a, &b));
        b.drain_progress = 10;
        assert!(status_differs(&a, &b));
    }
}
