//! The node's part of a maintenance: nmo's label, two taints and the cordon, put on and taken
//! off without touching anyone else's.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::model::{
    DRAIN_TAINT_KEY, EXCLUDE_LABEL, EXCLUDE_LABEL_VALUE, NodePatch, NodeState, Taint,
    UNSCHEDULABLE_TAINT_KEY,
};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::at as t;

    fn node() -> NodeState {
        NodeState::test("n1")
            .with_taint(Taint {
                key: "foreign".into(),
                value: Some("x".into()),
                effect: "NoExecute".into(),
                time_added: None,
            })
            .with_label("a", "b")
            .at_version("1")
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
}
