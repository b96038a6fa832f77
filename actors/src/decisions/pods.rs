//! Which pods a drain removes, how, and how far it got.

use crate::model::{PodInfo, PodPhase, Uid};

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
    /// Evict through the Eviction API (respects PDBs), orphaned DaemonSet pods included: a
    /// budget may cover one.
    Evict,
    /// Delete directly: finished pods (no budget counts them).
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
    if matches!(pod.phase, PodPhase::Succeeded | PodPhase::Failed) {
        return PodAction::Delete;
    }
    // An orphaned DaemonSet pod too: evicted like kubectl drain does, so a budget covering it
    // is honoured.
    PodAction::Evict
}

/// The DaemonSet owning a pod, as `(namespace, name)`, if any.
pub fn daemonset_of(pod: &PodInfo) -> Option<(String, String)> {
    daemonset_ref(pod).map(|ds| (ds.namespace, ds.name))
}

/// The DaemonSet a pod names as its controller: one DaemonSet, as long as it exists. One
/// deleted and created again under the same name (with `--cascade=orphan`, say) has another
/// uid: the pods of the old one are orphans, those of the new one are not.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DaemonSetRef {
    /// Namespace (the pod's).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Uid (empty if the pod's owner reference has none).
    pub uid: Uid,
}

/// The DaemonSet owning a pod, if any.
pub fn daemonset_ref(pod: &PodInfo) -> Option<DaemonSetRef> {
    pod.controller
        .as_ref()
        .filter(|owner| owner.kind == "DaemonSet")
        .map(|owner| DaemonSetRef {
            namespace: pod.namespace.to_string(),
            name: owner.name.clone(),
            uid: owner.uid.clone(),
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> PodInfo {
        PodInfo::test("ns", name)
    }

    fn ds_pod() -> PodInfo {
        pod("ds").controlled_by("DaemonSet", "agent")
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
    fn daemonset_pod_needs_lookup_then_orphan_is_evicted() {
        assert_eq!(classify(&ds_pod(), None), PodAction::CheckDaemonSet);
        assert_eq!(
            classify(&ds_pod(), Some(false)),
            PodAction::Evict,
            "an orphan is evicted: a budget may cover it"
        );
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
}
