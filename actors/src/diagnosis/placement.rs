//! Which pod a PDB waits for, and whether it would fit a node if that node were not in
//! maintenance (pure).

use crate::decisions;
use crate::model::{NO_SCHEDULE, NodeState, OwnerRef};
use crate::pdb::PdbPod;

/// The pod a blocked PDB waits for, among the pods it selects: one the scheduler cannot
/// place comes first (it will not resolve by itself), then one of the same controller as the
/// blocked pod (its replacement, most likely), then any other pod that is not ready yet. None
/// when every pod is ready (e.g. the replacement is not even created yet).
pub fn waited_for<'a>(pods: &'a [PdbPod], blocked: Option<&OwnerRef>) -> Option<&'a PdbPod> {
    let rank = |p: &PdbPod| {
        (
            p.unschedulable.is_none(),
            blocked.is_none_or(|owner| p.controller.as_ref() != Some(owner)),
            p.name.clone(),
        )
    };
    pods.iter().filter(|p| p.awaited()).min_by_key(|p| rank(p))
}

/// Whether `pod` would fit `node` were the node not in maintenance: nmo's taints and the
/// cordon are ignored; every other NoSchedule/NoExecute taint must be tolerated and the node
/// must carry the pod's nodeSelector labels. (Resources and affinity are the scheduler's and
/// not judged here.)
pub fn fits_if_uncordoned(pod: &PdbPod, node: &NodeState) -> bool {
    let taints = decisions::without_maintenance_taints(&node.taints);
    let tolerated = taints
        .iter()
        .filter(|t| t.effect == NO_SCHEDULE || t.effect == "NoExecute")
        .all(|t| pod.tolerations.iter().any(|tol| tol.tolerates(t)));
    let selected = pod
        .node_selector
        .iter()
        .all(|(k, v)| node.labels.get(k) == Some(v));
    tolerated && selected
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::{PodPhase, Taint};
    use crate::pdb::Toleration;

    fn pod(name: &str, ready: bool) -> PdbPod {
        PdbPod {
            namespace: "app".into(),
            name: name.into(),
            controller: Some(OwnerRef {
                kind: "ReplicaSet".into(),
                name: "web-rs".into(),
                uid: crate::model::Uid::default(),
            }),
            phase: if ready {
                PodPhase::Running
            } else {
                PodPhase::Pending
            },
            ready,
            terminating: false,
            node_name: None,
            unschedulable: None,
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
        }
    }

    fn node(name: &str) -> NodeState {
        let mut node = NodeState {
            name: name.into(),
            ..NodeState::default()
        };
        node.labels
            .insert("kubernetes.io/hostname".into(), name.into());
        node
    }

    #[test]
    fn the_unschedulable_pod_is_named_first_then_the_same_controller() {
        let mut other = pod("db-0", false);
        other.controller = Some(OwnerRef {
            kind: "StatefulSet".into(),
            name: "db".into(),
            uid: crate::model::Uid::default(),
        });
        let starting = pod("web-b", false);
        let ready = pod("web-a", true);
        let owner = starting.controller.clone();
        let pods = [ready.clone(), other.clone(), starting.clone()];
        assert_eq!(
            waited_for(&pods, owner.as_ref()).map(|p| p.name.as_str()),
            Some("web-b")
        );
        let mut stuck = other;
        stuck.unschedulable = Some("0/3 nodes are available".into());
        let pods = [ready.clone(), starting, stuck];
        assert_eq!(
            waited_for(&pods, owner.as_ref()).map(|p| p.name.as_str()),
            Some("db-0")
        );
        assert!(waited_for(&[ready], owner.as_ref()).is_none());
    }

    #[test]
    fn a_terminating_or_finished_pod_is_not_waited_for() {
        let mut going = pod("web-a", false);
        going.terminating = true;
        let mut done = pod("web-b", false);
        done.phase = PodPhase::Succeeded;
        assert!(waited_for(&[going, done], None).is_none());
    }

    #[test]
    fn nmo_taints_and_the_cordon_do_not_count_but_others_do() {
        let pinned = {
            let mut p = pod("web-x", false);
            p.node_selector
                .insert("kubernetes.io/hostname".into(), "n1".into());
            p
        };
        let maintained = NodeState {
            unschedulable: true,
            taints: decisions::maintenance_taints(None).to_vec(),
            ..node("n1")
        };
        assert!(fits_if_uncordoned(&pinned, &maintained));
        assert!(!fits_if_uncordoned(&pinned, &node("n2")), "nodeSelector");
        let gpu = Taint::no_schedule("gpu");
        let tainted = NodeState {
            taints: vec![gpu.clone()],
            ..node("n1")
        };
        assert!(!fits_if_uncordoned(&pinned, &tainted));
        let mut tolerant = pinned;
        tolerant.tolerations.push(Toleration {
            key: "gpu".into(),
            exists: true,
            ..Toleration::default()
        });
        assert!(fits_if_uncordoned(&tolerant, &tainted));
        let everything = Toleration {
            exists: true,
            ..Toleration::default()
        };
        assert!(everything.tolerates(&gpu));
        let equal = Toleration {
            key: "gpu".into(),
            value: "a100".into(),
            ..Toleration::default()
        };
        assert!(!equal.tolerates(&gpu), "value differs");
    }
}
