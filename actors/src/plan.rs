//! Pure decisions: the actors ask these functions what to do, then do it. Nothing here touches
//! the cluster or the clock (time is always passed in).

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::model::{
    Condition, DRAIN_TAINT_KEY, EXCLUDE_LABEL, EXCLUDE_LABEL_VALUE, LEASE_HOLDER, Lease,
    Maintenance, MaintenanceStatus, NodePatch, NodeState, PodInfo, PodPhase, Taint,
    UNSCHEDULABLE_TAINT_KEY,
};

/// Lease name for a node.
pub fn lease_name(node: &str) -> String {
    format!("node-{node}")
}

// --- Pods ------------------------------------------------------------------------------------

/// Why a pod stays on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// Managed by an existing DaemonSet (it would be recreated at once).
    DaemonSet,
    /// Mirror (static) pod: the kubelet owns it, the API cannot remove it.
    Mirror,
}

/// What the drain does with one pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodAction {
    /// Evict through the Eviction API (respects PDBs).
    Evict,
    /// Delete directly: finished pods and orphaned DaemonSet pods.
    Delete,
    /// Already terminating: wait for it to go.
    Wait,
    /// Leave it.
    Skip(SkipReason),
    /// DaemonSet-owned: whether it is an orphan depends on the DaemonSet existing; look it up
    /// and classify again.
    CheckDaemonSet,
}

impl PodAction {
    /// True when the drain must see this pod gone before the node counts as drained.
    pub fn is_pending(self) -> bool {
        !matches!(self, PodAction::Skip(_))
    }
}

/// Classifies one pod. `daemonset_exists` answers for DaemonSet-owned pods (None = unknown).
pub fn classify(pod: &PodInfo, daemonset_exists: Option<bool>) -> PodAction {
    if pod.is_mirror {
        return PodAction::Skip(SkipReason::Mirror);
    }
    let daemonset_owned = pod
        .controller
        .as_ref()
        .is_some_and(|owner| owner.kind == "DaemonSet");
    if daemonset_owned {
        // Checked before "terminating" and "finished": kubectl drain never touches a managed
        // DaemonSet pod whatever its phase, and it must not count as pending.
        match daemonset_exists {
            Some(true) => return PodAction::Skip(SkipReason::DaemonSet),
            None => return PodAction::CheckDaemonSet,
            Some(false) => {}
        }
    }
    if pod.terminating {
        return PodAction::Wait;
    }
    if matches!(pod.phase, PodPhase::Succeeded | PodPhase::Failed) || daemonset_owned {
        return PodAction::Delete;
    }
    PodAction::Evict
}

/// The DaemonSet owning a pod, as `(namespace, name)`, if any.
pub fn daemonset_of(pod: &PodInfo) -> Option<(String, String)> {
    pod.controller
        .as_ref()
        .filter(|owner| owner.kind == "DaemonSet")
        .map(|owner| (pod.namespace.clone(), owner.name.clone()))
}

/// `drainProgress`: `(evictionPods - pending) * 100 / evictionPods`, clamped to 0..100, never
/// below `previous` while the maintenance is Running. No pod to evict means 100.
pub fn progress(eviction_pods: i32, pending: usize, previous: i32, running: bool) -> i32 {
    let computed = if eviction_pods <= 0 {
        100
    } else {
        let pending = i64::try_from(pending).unwrap_or(i64::MAX);
        let total = i64::from(eviction_pods);
        let value = (total - pending).saturating_mul(100) / total;
        // Clamped to 0..=100, so the narrowing cannot fail.
        i32::try_from(value.clamp(0, 100)).unwrap_or(0)
    };
    if running {
        computed.max(previous.clamp(0, 100))
    } else {
        computed
    }
}

// --- Node: taints, label, cordon ---------------------------------------------------------

fn ours(taint: &Taint) -> bool {
    maintenance_taints(None)
        .iter()
        .any(|mine| mine.same_as(taint))
}

/// nmo's two taints, stamped with `time_added` when given.
pub fn maintenance_taints(time_added: Option<DateTime<Utc>>) -> [Taint; 2] {
    let mut drain = Taint::no_schedule(DRAIN_TAINT_KEY);
    let mut unschedulable = Taint::no_schedule(UNSCHEDULABLE_TAINT_KEY);
    drain.time_added = time_added;
    unschedulable.time_added = time_added;
    [drain, unschedulable]
}

/// `current` plus whichever of nmo's taints is missing; foreign taints are kept as they are.
pub fn with_maintenance_taints(current: &[Taint], now: DateTime<Utc>) -> Vec<Taint> {
    let mut taints = current.to_vec();
    for mine in maintenance_taints(Some(now)) {
        if !taints.iter().any(|t| t.same_as(&mine)) {
            taints.push(mine);
        }
    }
    taints
}

/// `current` without nmo's taints; foreign taints are kept.
pub fn without_maintenance_taints(current: &[Taint]) -> Vec<Taint> {
    current.iter().filter(|t| !ours(t)).cloned().collect()
}

/// True when the node is labelled, tainted and cordoned for maintenance.
pub fn node_in_maintenance(node: &NodeState) -> bool {
    node.unschedulable
        && node.labels.get(EXCLUDE_LABEL).map(String::as_str) == Some(EXCLUDE_LABEL_VALUE)
        && maintenance_taints(None)
            .iter()
            .all(|mine| node.taints.iter().any(|t| t.same_as(mine)))
}

/// The patch that puts a node into maintenance, or None when it already is.
pub fn maintenance_patch(node: &NodeState, now: DateTime<Utc>) -> Option<NodePatch> {
    if node_in_maintenance(node) {
        return None;
    }
    let mut labels = BTreeMap::new();
    if node.labels.get(EXCLUDE_LABEL).map(String::as_str) != Some(EXCLUDE_LABEL_VALUE) {
        labels.insert(
            EXCLUDE_LABEL.to_string(),
            Some(EXCLUDE_LABEL_VALUE.to_string()),
        );
    }
    Some(NodePatch {
        node: node.name.clone(),
        expected_taints: node.taints.clone(),
        desired_taints: with_maintenance_taints(&node.taints, now),
        unschedulable: (!node.unschedulable).then_some(true),
        labels,
    })
}

/// The patch that takes a node out of maintenance, or None when nothing of nmo's is left.
pub fn undo_patch(node: &NodeState) -> Option<NodePatch> {
    let has_label = node.labels.contains_key(EXCLUDE_LABEL);
    let has_taint = node.taints.iter().any(ours);
    if !has_label && !has_taint && !node.unschedulable {
        return None;
    }
    let mut labels = BTreeMap::new();
    if has_label {
        labels.insert(EXCLUDE_LABEL.to_string(), None);
    }
    Some(NodePatch {
        node: node.name.clone(),
        expected_taints: node.taints.clone(),
        desired_taints: without_maintenance_taints(&node.taints),
        unschedulable: node.unschedulable.then_some(false),
        labels,
    })
}

// --- Lease -----------------------------------------------------------------------------------

/// A lease is valid while `renewTime + leaseDurationSeconds >= now` and renewTime is not in the
/// future. A lease without renewTime or duration is not valid.
pub fn lease_valid(lease: &Lease, now: DateTime<Utc>) -> bool {
    let (Some(renew), Some(seconds)) = (lease.renew_time, lease.lease_duration_seconds) else {
        return false;
    };
    renew <= now && renew + chrono::Duration::seconds(i64::from(seconds)) >= now
}

/// When a lease stops being valid (None if it never was).
pub fn lease_expiry(lease: &Lease) -> Option<DateTime<Utc>> {
    let (renew, seconds) = (lease.renew_time?, lease.lease_duration_seconds?);
    Some(renew + chrono::Duration::seconds(i64::from(seconds)))
}

/// What to do about the node lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseAction {
    /// No lease: create this one.
    Create(Lease),
    /// Write this one (renewal of ours, or take-over of an expired one).
    Update(Lease),
    /// Someone else holds a valid lease: hands off.
    HeldByOther {
        /// The holder identity ("unknown" if unset).
        holder: String,
        /// When their lease expires, if known.
        until: Option<DateTime<Utc>>,
    },
}

/// Decides how to take or renew the lease, like medik8s' lease manager: ours is renewed (a lapsed
/// one of ours is re-acquired), a foreign valid one is respected, a foreign expired one is taken
/// over with `leaseTransitions + 1`.
pub fn plan_lease(
    existing: Option<&Lease>,
    namespace: &str,
    node: &str,
    now: DateTime<Utc>,
    duration: Duration,
) -> LeaseAction {
    let seconds = i32::try_from(duration.as_secs()).unwrap_or(i32::MAX);
    let Some(lease) = existing else {
        return LeaseAction::Create(Lease {
            namespace: namespace.to_string(),
            name: lease_name(node),
            holder_identity: Some(LEASE_HOLDER.to_string()),
            lease_duration_seconds: Some(seconds),
            acquire_time: Some(now),
            renew_time: Some(now),
            lease_transitions: Some(0),
            resource_version: String::new(),
        });
    };
    let ours = lease.holder_identity.as_deref() == Some(LEASE_HOLDER);
    let valid = lease_valid(lease, now);
    if !ours && valid {
        return LeaseAction::HeldByOther {
            holder: lease
                .holder_identity
                .clone()
                .unwrap_or_else(|| "unknown".to_string()),
            until: lease_expiry(lease),
        };
    }
    let mut next = lease.clone();
    if !ours || !valid {
        next.acquire_time = Some(now);
        next.lease_transitions = Some(lease.lease_transitions.unwrap_or(0).saturating_add(1));
    }
    next.holder_identity = Some(LEASE_HOLDER.to_string());
    next.lease_duration_seconds = Some(seconds);
    next.renew_time = Some(now);
    LeaseAction::Update(next)
}

/// True when the lease is held by nmo (valid or not).
pub fn lease_is_ours(lease: &Lease) -> bool {
    lease.holder_identity.as_deref() == Some(LEASE_HOLDER)
}

/// Result of counting one failure to take or keep the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseFailure {
    /// New `errorOnLeaseCount`.
    pub count: i32,
    /// True when the maintenance must stop (undo and Failed).
    pub give_up: bool,
}

/// Maximum `errorOnLeaseCount` tolerated; one more stops the maintenance.
pub const MAX_LEASE_ERRORS: i32 = 3;

/// Counts a lease failure like NMO: only once evictions began; above 3 the maintenance stops.
pub fn lease_failure(count: i32, evictions_began: bool) -> LeaseFailure {
    if !evictions_began {
        return LeaseFailure {
            count,
            give_up: false,
        };
    }
    let count = count.saturating_add(1);
    LeaseFailure {
        count,
        give_up: count > MAX_LEASE_ERRORS,
    }
}

// --- Two NodeMaintenances for one node ---------------------------------------------------

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

// --- Status ----------------------------------------------------------------------------------

/// Sets a condition, keeping its transition time when the status value does not change.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: DateTime<Utc>,
) {
    let status = if status { "True" } else { "False" };
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if existing.status != status {
            existing.last_transition_time = now;
            existing.status = status.to_string();
        }
        existing.reason = reason.to_string();
        existing.message = message.to_string();
        return;
    }
    conditions.push(Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        last_transition_time: now,
    });
}

/// The condition of a type, if present.
pub fn condition<'a>(status: &'a MaintenanceStatus, type_: &str) -> Option<&'a Condition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

/// True when two statuses differ in anything but `lastUpdate` (which changes with every write,
/// so comparing it would make every tick a write).
pub fn status_differs(a: &MaintenanceStatus, b: &MaintenanceStatus) -> bool {
    let mut a = a.clone();
    a.last_update = b.last_update;
    &a != b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::OwnerRef;
    use chrono::TimeZone;

    fn t(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + secs, 0).single().unwrap()
    }

    fn pod(name: &str) -> PodInfo {
        PodInfo {
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            phase: PodPhase::Running,
            controller: Some(OwnerRef {
                kind: "ReplicaSet".into(),
                name: "rs".into(),
            }),
            is_mirror: false,
            has_empty_dir: false,
            terminating: false,
            grace_period_seconds: Some(30),
        }
    }

    fn ds_pod() -> PodInfo {
        let mut p = pod("ds");
        p.controller = Some(OwnerRef {
            kind: "DaemonSet".into(),
            name: "agent".into(),
        });
        p
    }

    #[test]
    fn managed_daemonset_pod_is_skipped() {
        assert_eq!(
            classify(&ds_pod(), Some(true)),
            PodAction::Skip(SkipReason::DaemonSet)
        );
        assert!(!classify(&ds_pod(), Some(true)).is_pending());
    }

    #[test]
    fn daemonset_pod_needs_lookup_then_orphan_is_deleted() {
        assert_eq!(classify(&ds_pod(), None), PodAction::CheckDaemonSet);
        assert_eq!(classify(&ds_pod(), Some(false)), PodAction::Delete);
        assert_eq!(
            daemonset_of(&ds_pod()),
            Some(("ns".to_string(), "agent".to_string()))
        );
        assert_eq!(daemonset_of(&pod("a")), None);
    }

    #[test]
    fn mirror_pod_is_skipped() {
        let mut p = pod("static");
        p.is_mirror = true;
        p.controller = None;
        assert_eq!(classify(&p, None), PodAction::Skip(SkipReason::Mirror));
    }

    #[test]
    fn finished_pods_are_deleted() {
        let mut p = pod("job");
        p.phase = PodPhase::Succeeded;
        assert_eq!(classify(&p, None), PodAction::Delete);
        p.phase = PodPhase::Failed;
        assert_eq!(classify(&p, None), PodAction::Delete);
    }

    #[test]
    fn empty_dir_and_unmanaged_pods_are_evicted() {
        let mut p = pod("cache");
        p.has_empty_dir = true;
        assert_eq!(classify(&p, None), PodAction::Evict);
        p.controller = None;
        assert_eq!(classify(&p, None), PodAction::Evict);
    }

    #[test]
    fn terminating_pod_is_waited_for_and_pending() {
        let mut p = pod("going");
        p.terminating = true;
        assert_eq!(classify(&p, None), PodAction::Wait);
        assert!(PodAction::Wait.is_pending());
    }

    #[test]
    fn progress_formula() {
        assert_eq!(progress(10, 10, 0, true), 0);
        assert_eq!(progress(10, 3, 0, true), 70);
        assert_eq!(progress(3, 1, 0, true), 66);
        assert_eq!(progress(10, 0, 0, true), 100);
        assert_eq!(progress(0, 0, 0, true), 100);
    }

    #[test]
    fn progress_clamped_and_never_backwards_while_running() {
        // More pending than counted (a replacement pod landed): clamped at 0, but not below
        // what was already reported.
        assert_eq!(progress(4, 9, 0, true), 0);
        assert_eq!(progress(4, 3, 50, true), 50);
        assert_eq!(progress(4, 3, 50, false), 25);
        assert_eq!(progress(4, 0, 500, true), 100);
    }

    fn node() -> NodeState {
        NodeState {
            name: "n1".into(),
            uid: "uid-n1".into(),
            unschedulable: false,
            taints: vec![Taint {
                key: "foreign".into(),
                value: Some("x".into()),
                effect: "NoExecute".into(),
                time_added: None,
            }],
            labels: BTreeMap::from([("a".to_string(), "b".to_string())]),
            resource_version: "1".into(),
        }
    }

    #[test]
    fn maintenance_patch_adds_ours_keeps_foreign_and_tests_current() {
        let n = node();
        let patch = maintenance_patch(&n, t(0)).unwrap();
        assert_eq!(patch.expected_taints, n.taints);
        assert_eq!(patch.desired_taints.len(), 3);
        assert_eq!(patch.desired_taints[0].key, "foreign");
        assert!(
            patch
                .desired_taints
                .iter()
                .any(|t| t.key == DRAIN_TAINT_KEY && t.effect == "NoSchedule")
        );
        assert!(
            patch
                .desired_taints
                .iter()
                .any(|t| t.key == UNSCHEDULABLE_TAINT_KEY && t.effect == "NoSchedule")
        );
        assert_eq!(patch.unschedulable, Some(true));
        assert_eq!(
            patch.labels.get(EXCLUDE_LABEL),
            Some(&Some("true".to_string()))
        );
    }

    #[test]
    fn node_in_maintenance_needs_no_patch_and_partial_drift_is_repaired() {
        let mut n = node();
        n.unschedulable = true;
        n.taints = with_maintenance_taints(&n.taints, t(0));
        n.labels.insert(EXCLUDE_LABEL.into(), "true".into());
        assert!(node_in_maintenance(&n));
        assert_eq!(maintenance_patch(&n, t(1)), None);
        n.unschedulable = false;
        let patch = maintenance_patch(&n, t(1)).unwrap();
        assert_eq!(patch.unschedulable, Some(true));
        assert!(patch.labels.is_empty());
        assert_eq!(patch.desired_taints, n.taints, "no taint duplicated");
    }

    #[test]
    fn undo_removes_only_ours() {
        let mut n = node();
        n.unschedulable = true;
        n.taints = with_maintenance_taints(&n.taints, t(0));
        n.labels.insert(EXCLUDE_LABEL.into(), "true".into());
        let patch = undo_patch(&n).unwrap();
        assert_eq!(patch.desired_taints, node().taints);
        assert_eq!(patch.unschedulable, Some(false));
        assert_eq!(patch.labels.get(EXCLUDE_LABEL), Some(&None));
        assert_eq!(undo_patch(&node()), None);
    }

    fn lease(holder: &str, renew: i64, transitions: i32) -> Lease {
        Lease {
            namespace: "medik8s-leases".into(),
            name: "node-n1".into(),
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(3600),
            acquire_time: Some(t(renew)),
            renew_time: Some(t(renew)),
            lease_transitions: Some(transitions),
            resource_version: "7".into(),
        }
    }

    #[test]
    fn lease_validity() {
        let l = lease("x", 0, 0);
        assert!(lease_valid(&l, t(0)));
        assert!(lease_valid(&l, t(3600)));
        assert!(!lease_valid(&l, t(3601)));
        assert!(
            !lease_valid(&l, t(-1)),
            "renewTime in the future is invalid"
        );
        let mut no_renew = l.clone();
        no_renew.renew_time = None;
        assert!(!lease_valid(&no_renew, t(0)));
    }

    #[test]
    fn missing_lease_is_created() {
        let d = Duration::from_secs(3600);
        let LeaseAction::Create(l) = plan_lease(None, "ns", "n1", t(5), d) else {
            panic!("expected create");
        };
        assert_eq!(l.name, "node-n1");
        assert_eq!(l.namespace, "ns");
        assert_eq!(l.holder_identity.as_deref(), Some(LEASE_HOLDER));
        assert_eq!(l.lease_duration_seconds, Some(3600));
        assert_eq!(l.renew_time, Some(t(5)));
    }

    #[test]
    fn foreign_valid_lease_is_respected() {
        let d = Duration::from_secs(3600);
        let l = lease("node-healthcheck", 0, 2);
        assert_eq!(
            plan_lease(Some(&l), "ns", "n1", t(10), d),
            LeaseAction::HeldByOther {
                holder: "node-healthcheck".into(),
                until: Some(t(3600))
            }
        );
    }

    #[test]
    fn foreign_expired_lease_is_taken_over_with_transition() {
        let d = Duration::from_secs(3600);
        let l = lease("node-healthcheck", 0, 2);
        let LeaseAction::Update(next) = plan_lease(Some(&l), "ns", "n1", t(4000), d) else {
            panic!("expected take-over");
        };
        assert_eq!(next.holder_identity.as_deref(), Some(LEASE_HOLDER));
        assert_eq!(next.lease_transitions, Some(3));
        assert_eq!(next.acquire_time, Some(t(4000)));
        assert_eq!(next.renew_time, Some(t(4000)));
        assert_eq!(next.resource_version, "7");
    }

    #[test]
    fn own_lease_is_renewed_without_transition() {
        let d = Duration::from_secs(3600);
        let l = lease(LEASE_HOLDER, 0, 1);
        let LeaseAction::Update(next) = plan_lease(Some(&l), "ns", "n1", t(1200), d) else {
            panic!("expected renewal");
        };
        assert_eq!(next.lease_transitions, Some(1));
        assert_eq!(next.acquire_time, Some(t(0)));
        assert_eq!(next.renew_time, Some(t(1200)));
        assert!(lease_is_ours(&next));
    }

    #[test]
    fn lease_errors_count_only_after_evictions_began() {
        assert_eq!(
            lease_failure(0, false),
            LeaseFailure {
                count: 0,
                give_up: false
            }
        );
        assert_eq!(
            lease_failure(2, true),
            LeaseFailure {
                count: 3,
                give_up: false
            }
        );
        assert_eq!(
            lease_failure(3, true),
            LeaseFailure {
                count: 4,
                give_up: true
            }
        );
    }

    fn nm(name: &str, created: i64) -> Maintenance {
        Maintenance {
            name: name.into(),
            uid: format!("uid-{name}"),
            resource_version: "1".into(),
            node_name: "n1".into(),
            reason: String::new(),
            creation_timestamp: t(created),
            deleting: false,
            finalizers: vec![],
            status: None,
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
