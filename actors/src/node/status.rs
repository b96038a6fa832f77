//! What the status says at each step of a maintenance (pure; the actor writes it).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::PendingPod;
use super::ops::InitialCounts;
use crate::model::{MaintenanceStatus, PendingPodReason, Phase, PodRef, conditions};
use crate::plan::{self, PodAction};

/// First-time status: Running with the counts taken when maintenance began.
pub(super) fn begin(status: &mut MaintenanceStatus, initial: &InitialCounts, now: DateTime<Utc>) {
    status.phase = Some(Phase::Running);
    status.total_pods = initial.total;
    status.eviction_pods = initial.eviction;
    status.pending_pods = initial.pending.iter().map(|p| p.name.clone()).collect();
    status.pending_pods_refs = initial.pending.clone();
    status.drain_progress = plan::progress(initial.eviction, initial.pending.len(), 0, true);
    plan::set_condition(
        &mut status.conditions,
        conditions::LEASE_ACQUIRED,
        false,
        conditions::NOT_STARTED,
        "taking the node lease",
        now,
    );
    plan::set_condition(
        &mut status.conditions,
        conditions::DRAINED,
        false,
        conditions::NOT_STARTED,
        "the drain has not started",
        now,
    );
}

/// The lease is ours.
pub(super) fn lease_acquired(status: &mut MaintenanceStatus, now: DateTime<Utc>) {
    status.error_on_lease_count = 0;
    let was_waiting = plan::condition(status, conditions::LEASE_ACQUIRED)
        .is_some_and(|c| c.reason == conditions::LEASE_HELD_BY_OTHER);
    if was_waiting {
        status.last_error = None;
    }
    plan::set_condition(
        &mut status.conditions,
        conditions::LEASE_ACQUIRED,
        true,
        conditions::LEASE_HELD,
        "nmo holds the node lease",
        now,
    );
}

/// Someone else holds a valid lease: say who, and until when.
pub(super) fn waiting_for_lease(
    status: &mut MaintenanceStatus,
    holder: &str,
    until: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) {
    let until = until.map_or_else(String::new, |t| format!(" until {}", t.to_rfc3339()));
    let message = format!("node lease is held by {holder}{until}; waiting for it");
    status.last_error = Some(message.clone());
    plan::set_condition(
        &mut status.conditions,
        conditions::LEASE_ACQUIRED,
        false,
        conditions::LEASE_HELD_BY_OTHER,
        &message,
        now,
    );
}

/// Failed, with the reason.
pub(super) fn fail(status: &mut MaintenanceStatus, error: String, now: DateTime<Utc>) {
    status.phase = Some(Phase::Failed);
    plan::set_condition(
        &mut status.conditions,
        conditions::DRAINED,
        false,
        conditions::FAILED,
        &error,
        now,
    );
    status.last_error = Some(error);
}

/// Updates the drain fields from the pending pods; returns true when the node is drained (the
/// status then says Succeeded).
pub(super) fn drain(
    status: &mut MaintenanceStatus,
    pending: &[PendingPod],
    reasons: &BTreeMap<PodRef, PendingPodReason>,
    errors: &[String],
    now: DateTime<Utc>,
) -> bool {
    let running = status.phase == Some(Phase::Running);
    if pending.is_empty() && errors.is_empty() {
        status.phase = Some(Phase::Succeeded);
        status.drain_progress = 100;
        status.pending_pods.clear();
        status.pending_pods_refs.clear();
        status.pending_pods_reasons.clear();
        status.last_error = None;
        plan::set_condition(
            &mut status.conditions,
            conditions::DRAINED,
            true,
            conditions::DRAIN_COMPLETE,
            "no evictable pod left on the node",
            now,
        );
        return true;
    }
    status.phase = Some(Phase::Running);
    status.drain_progress = plan::progress(
        status.eviction_pods,
        pending.len(),
        status.drain_progress,
        running,
    );
    status.pending_pods = pending.iter().map(|p| p.pod.name.clone()).collect();
    status.pending_pods_refs = pending.iter().map(|p| p.pod.clone()).collect();
    status.pending_pods_reasons = pending
        .iter()
        .map(|PendingPod { pod, action, .. }| {
            reasons
                .get(pod)
                .cloned()
                .unwrap_or_else(|| PendingPodReason {
                    namespace: pod.namespace.clone(),
                    name: pod.name.clone(),
                    reason: match action {
                        PodAction::Wait => "Terminating",
                        PodAction::Delete => "Deleting",
                        _ => "Evicting",
                    }
                    .to_string(),
                    pdb: None,
                    message: String::new(),
                })
        })
        .collect();
    let blocked = status
        .pending_pods_reasons
        .iter()
        .find(|r| r.reason == conditions::BLOCKED_BY_PDB);
    let problem = status.pending_pods_reasons.iter().find(|r| {
        !matches!(
            r.reason.as_str(),
            "Evicting" | "Evicted" | "Terminating" | "Deleting"
        )
    });
    let (reason, message) = match blocked {
        Some(b) => (
            conditions::BLOCKED_BY_PDB,
            format!(
                "pod {}/{} is blocked by PodDisruptionBudget {}: {}",
                b.namespace,
                b.name,
                b.pdb.as_deref().unwrap_or("(unknown)"),
                b.message
            ),
        ),
        None => (
            conditions::PODS_PENDING,
            format!("{} pods still on the node", pending.len()),
        ),
    };
    status.last_error = if !errors.is_empty() {
        Some(errors.join("; "))
    } else if blocked.is_some() {
        Some(message.clone())
    } else {
        problem.map(|p| format!("cannot evict pod {}/{}: {}", p.namespace, p.name, p.message))
    };
    plan::set_condition(
        &mut status.conditions,
        conditions::DRAINED,
        false,
        reason,
        &message,
        now,
    );
    false
}
