//! What the status says at each step of a maintenance (pure; the status writer writes it).
//!
//! (Over 400 lines only with its unit tests below: the code is 293 lines, one decision
//! kept with the cases that pin it.)

use std::borrow::Cow;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::blocked;
use super::errors::{DrainError, LeaseLost};
use super::pending::{PendingPod, PendingReason, PodReason};
use super::reasons::Reasons;
use crate::decisions::{self, RecordFinding};
use crate::diagnosis::Blocker;
use crate::model::{
    ConditionStatus, FailureKind, MaintenanceStatus, NodeState, Phase, PodRef, Uid, conditions,
};

/// Pod counts taken the first time a maintenance runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitialCounts {
    /// Every pod on the node.
    pub total: i32,
    /// Pods the drain removes.
    pub eviction: i32,
    /// Those pods.
    pub pending: Vec<PodRef>,
}

/// First-time status: Running with the counts taken when maintenance began.
pub(super) fn begin(status: &mut MaintenanceStatus, initial: &InitialCounts, now: DateTime<Utc>) {
    status.phase = Some(Phase::Running);
    status.total_pods = initial.total;
    status.eviction_pods = initial.eviction;
    status.pending_pods = initial.pending.iter().map(|p| p.name.clone()).collect();
    status.pending_pods_refs = initial.pending.as_slice().into();
    status.drain_progress = decisions::progress(initial.eviction, initial.pending.len(), 0, true);
    crate::fleet::mark_started(status, now);
    decisions::set_condition(
        &mut status.conditions,
        conditions::LEASE_ACQUIRED,
        false,
        conditions::NOT_STARTED,
        "taking the node lease",
        now,
    );
    decisions::set_condition(
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
    let was_waiting = decisions::condition(status, conditions::LEASE_ACQUIRED)
        .is_some_and(|c| c.reason == conditions::LEASE_HELD_BY_OTHER);
    if was_waiting {
        status.last_error = None;
    }
    decisions::set_condition(
        &mut status.conditions,
        conditions::LEASE_ACQUIRED,
        true,
        conditions::LEASE_HELD,
        "nmo holds the node lease",
        now,
    );
}

/// Whether the status says nmo held the node lease (`LeaseAcquired` True): what a new leader
/// or a restarted nmo knows of the lease from before it took the maintenance over.
pub(super) fn lease_was_held(status: &MaintenanceStatus) -> bool {
    decisions::condition(status, conditions::LEASE_ACQUIRED)
        .is_some_and(|c| c.status == ConditionStatus::True && c.reason == conditions::LEASE_HELD)
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
    decisions::set_condition(
        &mut status.conditions,
        conditions::LEASE_ACQUIRED,
        false,
        conditions::LEASE_HELD_BY_OTHER,
        &message,
        now,
    );
}

/// Failed, with its kind (the reason of `Drained`, what a restarted nmo knows it by) and what
/// went wrong (`lastError`, and the condition's message).
pub(super) fn fail(
    status: &mut MaintenanceStatus,
    kind: FailureKind,
    error: String,
    now: DateTime<Utc>,
) {
    status.phase = Some(Phase::Failed);
    decisions::set_condition(
        &mut status.conditions,
        conditions::DRAINED,
        false,
        kind.reason(),
        &error,
        now,
    );
    status.last_error = Some(error);
}

/// The kind of failure a Failed status records (see [`fail`]); None when it names none (not
/// Failed, or failed by an older nmo, whose reason was [`conditions::FAILED`]).
pub(super) fn failure_kind(status: &MaintenanceStatus) -> Option<FailureKind> {
    if status.phase != Some(Phase::Failed) {
        return None;
    }
    decisions::condition(status, conditions::DRAINED)
        .filter(|c| c.status == ConditionStatus::False)
        .and_then(|c| FailureKind::from_reason(&c.reason))
}

/// Gave up and the node changes are to be undone: said in the status (with the Failed phase)
/// before the undo starts, so that a restart in between still undoes.
pub(super) fn undo_due(status: &mut MaintenanceStatus, now: DateTime<Utc>) {
    decisions::set_condition(
        &mut status.conditions,
        conditions::NODE_RESTORED,
        false,
        conditions::UNDO_DUE,
        "the node changes of this maintenance are being undone",
        now,
    );
}

/// The node is in maintenance with `node`'s record of its prior state (the maintenance's own,
/// uid `uid`): its copy goes into the status, and the condition says what is known of the
/// node's prior state, and what was replaced on the way (`finding`, said once it happens).
pub(super) fn recorded(
    status: &mut MaintenanceStatus,
    node: &NodeState,
    uid: &Uid,
    finding: Option<RecordFinding>,
    now: DateTime<Utc>,
) {
    let Some(record) = node.record.as_ref().filter(|r| r.maintenance == *uid) else {
        return;
    };
    status.node_record = Some(record.clone());
    let said = decisions::condition(status, conditions::PRIOR_STATE_RECORDED).is_some();
    let (known, reason, message) = if record.prior_unknown {
        let message = format!(
            "node {} was already in maintenance, with no record of what it had before: its \
             undo takes off every mark of a maintenance (both taints, the cordon, the label), \
             as the Go operator's does",
            node.name
        );
        (false, conditions::PRIOR_STATE_UNKNOWN, message)
    } else if let Some(found) = &finding {
        let message = format!(
            "on node {}, {}: replaced; the undo restores what this maintenance recorded",
            node.name,
            found.describe()
        );
        (true, conditions::RECORD_REPLACED, message)
    } else if said {
        return;
    } else {
        let message = format!(
            "what node {} had before this maintenance is recorded: cordoned {}, drain taint {}, \
             unschedulable taint {}, exclude-from-remediation label {}",
            node.name,
            record.cordoned,
            record.drain_taint,
            record.unschedulable_taint,
            record.label
        );
        (true, conditions::RECORDED, message)
    };
    decisions::set_condition(
        &mut status.conditions,
        conditions::PRIOR_STATE_RECORDED,
        known,
        reason,
        &message,
        now,
    );
}

/// The node changes of a maintenance that gave up are undone.
pub(super) fn restored(status: &mut MaintenanceStatus, now: DateTime<Utc>) {
    decisions::set_condition(
        &mut status.conditions,
        conditions::NODE_RESTORED,
        true,
        conditions::RESTORED,
        "the node changes of this maintenance are undone",
        now,
    );
}

/// Whether a Failed status still owes its node an undo: it says so (see [`undo_due`]), or it
/// is a give-up for a lost lease and no condition says the node was restored: its kind says
/// so, or, recorded by an older nmo that kept the pending undo in memory only and named no
/// kind, its `lastError` is [`LeaseLost`]'s.
pub(super) fn undo_pending(status: &MaintenanceStatus) -> bool {
    if status.phase != Some(Phase::Failed) {
        return false;
    }
    match decisions::condition(status, conditions::NODE_RESTORED) {
        Some(condition) => condition.status == ConditionStatus::False,
        None => match failure_kind(status) {
            Some(kind) => kind == FailureKind::LeaseLost,
            None => status
                .last_error
                .as_deref()
                .is_some_and(|e| e.starts_with(LeaseLost::PREFIX)),
        },
    }
}

/// Updates the drain fields from the pending pods and what is known about each; returns true
/// when the node is drained (the status then says Succeeded).
/// No evictable pod is left, and no error: the status says Succeeded.
fn drained(status: &mut MaintenanceStatus, now: DateTime<Utc>) {
    status.phase = Some(Phase::Succeeded);
    status.drain_progress = 100;
    status.pending_pods = Arc::default();
    status.pending_pods_refs = Arc::default();
    status.pending_pods_reasons = Arc::default();
    status.last_error = None;
    decisions::set_condition(
        &mut status.conditions,
        conditions::DRAINED,
        true,
        conditions::DRAIN_COMPLETE,
        "no evictable pod left on the node",
        now,
    );
    not_blocked(status);
}

/// Brings the status's lists of pending pods (names, references, reasons) up to `pending`,
/// keeping each list that says the same already; returns each pending pod with its reason.
fn pending_lists<'a>(
    status: &mut MaintenanceStatus,
    pending: &'a [PendingPod],
    reasons: Reasons<'a>,
) -> Vec<(&'a PodRef, Cow<'a, PodReason>)> {
    keep_or_replace(
        &mut status.pending_pods,
        pending,
        |name, p| *name == p.pod.name,
        |p| p.pod.name.clone(),
    );
    keep_or_replace(
        &mut status.pending_pods_refs,
        pending,
        |pod, p| *pod == p.pod,
        |p| p.pod.clone(),
    );
    let why: Vec<(&PodRef, Cow<'_, PodReason>)> = pending
        .iter()
        .map(|p| {
            let reason = reasons
                .get(&p.pod)
                .map_or_else(|| Cow::Owned(PodReason::of_action(p.action)), Cow::Borrowed);
            (&p.pod, reason)
        })
        .collect();
    keep_or_replace(
        &mut status.pending_pods_reasons,
        &why,
        |entry, (pod, reason)| reason.describes(pod, entry),
        |(pod, reason)| reason.to_status(pod),
    );
    why
}

pub(super) fn drain(
    status: &mut MaintenanceStatus,
    pending: &[PendingPod],
    reasons: Reasons<'_>,
    errors: &[DrainError],
    now: DateTime<Utc>,
) -> bool {
    let running = status.phase == Some(Phase::Running);
    if pending.is_empty() && errors.is_empty() {
        drained(status, now);
        return true;
    }
    status.phase = Some(Phase::Running);
    status.drain_progress = decisions::progress(
        status.eviction_pods,
        pending.len(),
        status.drain_progress,
        running,
    );
    let why = pending_lists(status, pending, reasons);
    let blocked = why
        .iter()
        .find(|(_, r)| r.reason == PendingReason::BlockedByPdb);
    let problem = why.iter().find(|(_, r)| !r.reason.is_progress());
    let (reason, message) = match blocked {
        Some((pod, b)) => (
            conditions::BLOCKED_BY_PDB,
            format!(
                "pod {}/{} is blocked by PodDisruptionBudget {}: {}",
                pod.namespace,
                pod.name,
                b.pdb.as_deref().unwrap_or("(unknown)"),
                b.message
            ),
        ),
        None => (
            conditions::PODS_PENDING,
            format!("{} pods still on the node", pending.len()),
        ),
    };
    let worst = blocked::worst(pending, reasons);
    status.last_error = if !errors.is_empty() {
        let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
        Some(errors.join("; "))
    } else if let Some((pod, blocker)) = worst {
        Some(blocked_error(pod, blocker))
    } else if blocked.is_some() {
        Some(message.clone())
    } else {
        problem.map(|(pod, p)| {
            format!(
                "cannot evict pod {}/{}: {}",
                pod.namespace, pod.name, p.message
            )
        })
    };
    decisions::set_condition(
        &mut status.conditions,
        conditions::DRAINED,
        false,
        reason,
        &message,
        now,
    );
    match worst {
        Some((pod, blocker)) => decisions::set_condition(
            &mut status.conditions,
            conditions::DRAIN_BLOCKED,
            true,
            blocker.reason(),
            &format!("pod {}/{}: {blocker}", pod.namespace, pod.name),
            now,
        ),
        None => not_blocked(status),
    }
    false
}

/// `lastError` for a pod its PDB blocks: the API's refusal, naming the PDB, while nothing
/// more is known; the diagnosis once there is one.
fn blocked_error(pod: &PodRef, blocker: &Blocker) -> String {
    match blocker {
        Blocker::BudgetExhausted {
            pdb: Some(pdb),
            message,
        } => format!(
            "pod {}/{} is blocked by PodDisruptionBudget {pdb}: {message}",
            pod.namespace, pod.name
        ),
        other => format!("cannot evict pod {}/{}: {other}", pod.namespace, pod.name),
    }
}

/// No pod waits on a PDB: no `DrainBlocked` condition (so that `kubectl get nm -o wide`,
/// whose column reads the condition's reason, shows nothing for a drain that is not stuck).
fn not_blocked(status: &mut MaintenanceStatus) {
    status
        .conditions
        .retain(|c| c.type_ != conditions::DRAIN_BLOCKED);
}

/// Failed because `spec.drainTimeout` passed: `Drained` says so with its own reason, and
/// `DrainBlocked` keeps what blocked the drain.
/// Makes `list` say what `source` does (each entry as `make` makes it) unless it already says
/// the same (as `same` compares): an unchanged list is neither rebuilt (a drain pass runs on
/// every change of the node's pods, and most change nothing here) nor copied (it stays shared
/// with the copies of the status being written and written).
fn keep_or_replace<T, S>(
    list: &mut Arc<[T]>,
    source: &[S],
    same: impl Fn(&T, &S) -> bool,
    make: impl Fn(&S) -> T,
) {
    let unchanged = list.len() == source.len() && list.iter().zip(source).all(|(t, s)| same(t, s));
    if !unchanged {
        *list = source.iter().map(make).collect();
    }
}

pub(super) fn drain_timed_out(status: &mut MaintenanceStatus, error: String, now: DateTime<Utc>) {
    status.phase = Some(Phase::Failed);
    status.drain_deadline = None;
    status.drain_time_remaining = None;
    decisions::set_condition(
        &mut status.conditions,
        conditions::DRAINED,
        false,
        FailureKind::DrainTimeout.reason(),
        &error,
        now,
    );
    status.last_error = Some(error);
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use std::collections::BTreeMap;

    use super::*;
    use crate::decisions::PodAction;
    use crate::eviction::EvictionReply;
    use crate::ports::ClusterError;

    fn now() -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000, 0).single().unwrap()
    }

    fn pending(name: &str, action: PodAction) -> PendingPod {
        let pod = crate::model::PodInfo::test("app", name).unmanaged();
        PendingPod::of(&std::sync::Arc::new(pod), action)
    }

    fn running(eviction_pods: i32) -> MaintenanceStatus {
        MaintenanceStatus {
            phase: Some(Phase::Running),
            eviction_pods,
            ..MaintenanceStatus::default()
        }
    }

    #[test]
    fn a_give_up_for_a_lost_lease_owes_its_undo_whatever_its_last_error_says() {
        let mut status = running(1);
        status.phase = Some(Phase::Failed);
        status.last_error = Some("the node lease could not be kept".into());
        decisions::set_condition(
            &mut status.conditions,
            conditions::DRAINED,
            false,
            "LeaseLost",
            "the node lease could not be kept",
            now(),
        );
        assert!(undo_pending(&status));
        // Written by an older nmo: known by its `lastError`, as it was.
        let mut older = running(1);
        older.phase = Some(Phase::Failed);
        older.last_error = Some("failed to extend lease owned by us: x".into());
        assert!(undo_pending(&older));
        older.last_error = Some("node n1 not found".into());
        assert!(!undo_pending(&older));
    }

    #[test]
    fn nothing_pending_is_success_and_clears_the_error() {
        let mut status = running(2);
        status.last_error = Some("old".into());
        assert!(drain(
            &mut status,
            &[],
            Reasons::told(&BTreeMap::new()),
            &[],
            now()
        ));
        assert_eq!(status.phase, Some(Phase::Succeeded));
        assert_eq!(status.drain_progress, 100);
        assert_eq!(status.last_error, None);
    }

    #[test]
    fn unchanged_pod_lists_stay_shared_with_the_copies_of_the_status() {
        let mut status = running(1);
        let pods = [
            pending("web-0", PodAction::Evict),
            pending("web-1", PodAction::Evict),
        ];
        drain(
            &mut status,
            &pods,
            Reasons::told(&BTreeMap::new()),
            &[],
            now(),
        );
        let written = status.clone();
        drain(
            &mut status,
            &pods,
            Reasons::told(&BTreeMap::new()),
            &[],
            now(),
        );
        assert!(Arc::ptr_eq(&status.pending_pods, &written.pending_pods));
        assert!(Arc::ptr_eq(
            &status.pending_pods_refs,
            &written.pending_pods_refs
        ));
        assert!(Arc::ptr_eq(
            &status.pending_pods_reasons,
            &written.pending_pods_reasons
        ));
        drain(
            &mut status,
            &pods[1..],
            Reasons::told(&BTreeMap::new()),
            &[],
            now(),
        );
        assert_eq!(&*status.pending_pods, [Arc::<str>::from("web-1")]);
        assert_eq!(status.pending_pods_reasons.len(), 1);
        assert_eq!(written.pending_pods.len(), 2, "the copy keeps its own");
    }

    #[test]
    fn a_blocked_pod_names_its_pdb_in_last_error_and_the_condition() {
        let mut status = running(2);
        let pods = [
            pending("web-0", PodAction::Evict),
            pending("web-1", PodAction::Wait),
        ];
        let reasons = BTreeMap::from([(
            pods[0].pod.clone(),
            PodReason::of_reply(EvictionReply::Blocked {
                pdb: Some("web".into()),
                message: "needs 2".into(),
                blocker: None,
            }),
        )]);
        assert!(!drain(
            &mut status,
            &pods,
            Reasons::told(&reasons),
            &[],
            now()
        ));
        assert_eq!(status.drain_progress, 0);
        assert_eq!(
            status.last_error.as_deref(),
            Some("pod app/web-0 is blocked by PodDisruptionBudget web: needs 2")
        );
        let reasons: Vec<&str> = status
            .pending_pods_reasons
            .iter()
            .map(|r| r.reason.as_str())
            .collect();
        assert_eq!(reasons, ["BlockedByPodDisruptionBudget", "Terminating"]);
        let drained = decisions::condition(&status, conditions::DRAINED).unwrap();
        assert_eq!(drained.reason, conditions::BLOCKED_BY_PDB);
    }

    #[test]
    fn drain_blocked_is_there_while_a_pdb_blocks_and_gone_after() {
        let mut status = running(1);
        let pods = [pending("db-0", PodAction::Evict)];
        let reasons = BTreeMap::from([(
            pods[0].pod.clone(),
            PodReason::of_reply(EvictionReply::Blocked {
                pdb: Some("db".into()),
                message: "needs 1".into(),
                blocker: Some(crate::diagnosis::Blocker::StructuralBudget {
                    pdb: "db".into(),
                    why: crate::pdb::Structural::MaxUnavailableZero { value: "0".into() },
                }),
            }),
        )]);
        drain(&mut status, &pods, Reasons::told(&reasons), &[], now());
        let blocked = decisions::condition(&status, conditions::DRAIN_BLOCKED).unwrap();
        assert_eq!(
            (blocked.status.as_str(), blocked.reason.as_str()),
            ("True", "StructuralBudget")
        );
        assert_eq!(
            status.last_error.as_deref(),
            Some(
                "cannot evict pod app/db-0: PodDisruptionBudget db can never allow a disruption: maxUnavailable is 0: it never allows a disruption"
            )
        );
        assert_eq!(
            status.pending_pods_reasons[0].diagnosis.as_deref(),
            Some("StructuralBudget")
        );
        drain(
            &mut status,
            &pods,
            Reasons::told(&BTreeMap::new()),
            &[],
            now(),
        );
        assert!(decisions::condition(&status, conditions::DRAIN_BLOCKED).is_none());
    }

    #[test]
    fn drain_errors_come_first_in_last_error() {
        let mut status = running(1);
        let pods = [pending("p", PodAction::Evict)];
        let errors = [DrainError::ListPods(ClusterError::Transient("x".into()))];
        assert!(!drain(
            &mut status,
            &pods,
            Reasons::told(&BTreeMap::new()),
            &errors,
            now()
        ));
        assert_eq!(
            status.last_error.as_deref(),
            Some("cannot list pods: transient: x")
        );
        let drained = decisions::condition(&status, conditions::DRAINED).unwrap();
        assert_eq!(drained.message, "1 pods still on the node");
    }

    #[test]
    fn a_problem_other_than_a_pdb_is_named() {
        let mut status = running(1);
        let pods = [pending("p", PodAction::Evict)];
        let reasons = BTreeMap::from([(
            pods[0].pod.clone(),
            PodReason::of_reply(EvictionReply::Failed("boom".into())),
        )]);
        drain(&mut status, &pods, Reasons::told(&reasons), &[], now());
        assert_eq!(
            status.last_error.as_deref(),
            Some("cannot evict pod app/p: boom")
        );
    }
}
