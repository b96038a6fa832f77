//! The node's part of a maintenance: nmo's label, two taints and the cordon, put on and taken
//! off without touching anyone else's. Which record of the node's prior state a maintenance
//! keeps, and what an undo follows, is decided in [`super::record`].
//!
//! (Over 400 lines only with its unit tests below: the code is under 200 lines, one decision
//! kept with the cases that pin it.)

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::record::{self, Restore, Undoer};
use crate::model::{
    DRAIN_TAINT_KEY, EXCLUDE_LABEL, EXCLUDE_LABEL_VALUE, NodePatch, NodeRecord, NodeState,
    RecordWrite, Taint, UNSCHEDULABLE_TAINT_KEY, Uid,
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
        && has_label(node)
        && maintenance_taints(None)
            .iter()
            .all(|mine| node.taints.iter().any(|t| t.same_as(mine)))
}

fn has_label(node: &NodeState) -> bool {
    node.labels.get(EXCLUDE_LABEL).map(String::as_str) == Some(EXCLUDE_LABEL_VALUE)
}

/// The patch that puts a node into maintenance for the NodeMaintenance with uid
/// `maintenance` (and writes its record of what was there before, in the same patch, see
/// [`record::claim`]; `copy` is the maintenance's own copy of it), or None when it is in
/// maintenance and recorded as the maintenance's already.
pub fn maintenance_patch(
    node: &NodeState,
    maintenance: &Uid,
    copy: Option<&NodeRecord>,
    now: DateTime<Utc>,
) -> Option<NodePatch> {
    let record = record::claim(node, maintenance, copy).write;
    if node_in_maintenance(node) && record == RecordWrite::Keep {
        return None;
    }
    let mut labels = BTreeMap::new();
    if !has_label(node) {
        labels.insert(
            EXCLUDE_LABEL.to_string(),
            Some(EXCLUDE_LABEL_VALUE.to_string()),
        );
    }
    Some(NodePatch {
        node: node.name.clone(),
        expected_taints: node.taints.clone(),
        expected_version: node.resource_version.clone(),
        desired_taints: with_maintenance_taints(&node.taints, now),
        unschedulable: (!node.unschedulable).then_some(true),
        labels,
        record,
    })
}

/// The patch that takes back nmo's changes to a node, as [`record::restore`] decides for
/// `undoer`, or None when there is nothing of `undoer`'s to take back.
///
/// - A known prior state: what nmo added goes (label, either taint, the cordon), what was
///   there before stays; the record goes too.
/// - An unknown one (a node marked by an operator that kept no record, the Go operator):
///   everything of a maintenance goes, as the Go operator's undo does.
/// - Only the record: it goes, nothing else.
///
/// With `foreign_holder` (another operator validly holds the node's lease, e.g. a remediation
/// in progress) only what is nmo's alone goes (the drain taint, the label, the record): the
/// cordon and its taint now serve the holder, which took the node as it was and uncordons it
/// when it is done.
pub fn undo_patch(node: &NodeState, undoer: Undoer<'_>, foreign_holder: bool) -> Option<NodePatch> {
    let prior = match record::restore(node, undoer)? {
        Restore::Known(prior) => Some(prior.0),
        Restore::Unknown => Some(record::Prior {
            cordoned: false,
            drain_taint: false,
            unschedulable_taint: false,
            label: false,
        }),
        Restore::RecordOnly => None,
    };
    let record = if node.record.is_some() || node.unreadable_record {
        RecordWrite::Remove
    } else {
        RecordWrite::Keep
    };
    let (desired_taints, labels, unschedulable) = match prior {
        None => (node.taints.clone(), BTreeMap::new(), None),
        Some(prior) => {
            let keep_cordon = prior.cordoned || foreign_holder;
            let keep_unschedulable_taint = prior.unschedulable_taint || foreign_holder;
            let desired_taints: Vec<Taint> = node
                .taints
                .iter()
                .filter(|t| {
                    let added_drain =
                        !prior.drain_taint && t.same_as(&Taint::no_schedule(DRAIN_TAINT_KEY));
                    let added_unschedulable = !keep_unschedulable_taint
                        && t.same_as(&Taint::no_schedule(UNSCHEDULABLE_TAINT_KEY));
                    !(added_drain || added_unschedulable)
                })
                .cloned()
                .collect();
            let mut labels = BTreeMap::new();
            if !prior.label && node.labels.contains_key(EXCLUDE_LABEL) {
                labels.insert(EXCLUDE_LABEL.to_string(), None);
            }
            let unschedulable = (node.unschedulable && !keep_cordon).then_some(false);
            (desired_taints, labels, unschedulable)
        }
    };
    let unchanged = desired_taints.len() == node.taints.len()
        && labels.is_empty()
        && unschedulable.is_none()
        && record == RecordWrite::Keep;
    if unchanged {
        return None;
    }
    Some(NodePatch {
        node: node.name.clone(),
        expected_taints: node.taints.clone(),
        expected_version: node.resource_version.clone(),
        desired_taints,
        unschedulable,
        labels,
        record,
    })
}

/// True when the node carries changes of nmo's that an undo by `undoer` would take back.
pub fn marked_by(node: &NodeState, undoer: Undoer<'_>) -> bool {
    undo_patch(node, undoer, false).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decisions::record_of;
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

    const UID: &str = "uid-nm1";

    fn uid() -> Uid {
        UID.into()
    }

    fn mine() -> Undoer<'static> {
        Undoer::Maintenance {
            uid: UID,
            copy: None,
        }
    }

    #[test]
    fn maintenance_patch_adds_ours_keeps_foreign_and_tests_current() {
        let n = node();
        let patch = maintenance_patch(&n, &uid(), None, t(0)).unwrap();
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
        n.record = Some(record_of(&node(), &uid()));
        assert!(node_in_maintenance(&n));
        assert_eq!(maintenance_patch(&n, &uid(), None, t(1)), None);
        n.unschedulable = false;
        let patch = maintenance_patch(&n, &uid(), None, t(1)).unwrap();
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
        let patch = undo_patch(&n, mine(), false).unwrap();
        assert_eq!(patch.desired_taints, node().taints);
        assert_eq!(patch.unschedulable, Some(false));
        assert_eq!(patch.labels.get(EXCLUDE_LABEL), Some(&None));
        assert_eq!(undo_patch(&node(), mine(), false), None);
    }

    /// What nmo does to `before` when the maintenance `UID` starts.
    fn marked(before: &NodeState) -> NodeState {
        let patch = maintenance_patch(before, &uid(), None, t(0)).unwrap();
        let mut after = before.clone();
        after.taints = patch.desired_taints.clone();
        after.unschedulable = patch.unschedulable.unwrap_or(after.unschedulable);
        for (key, value) in patch.labels {
            match value {
                Some(value) => after.labels.insert(key, value),
                None => after.labels.remove(&key),
            };
        }
        if let RecordWrite::Set { record, .. } = patch.record {
            after.record = Some(record);
        }
        after
    }

    fn undone(node: &NodeState, undoer: Undoer<'_>, foreign_holder: bool) -> NodeState {
        let Some(patch) = undo_patch(node, undoer, foreign_holder) else {
            return node.clone();
        };
        let mut after = node.clone();
        after.taints = patch.desired_taints.clone();
        after.unschedulable = patch.unschedulable.unwrap_or(after.unschedulable);
        for (key, value) in patch.labels {
            match value {
                Some(value) => after.labels.insert(key, value),
                None => after.labels.remove(&key),
            };
        }
        if patch.record == RecordWrite::Remove {
            after.record = None;
        }
        after
    }

    #[test]
    fn the_first_change_records_what_was_there_and_undo_restores_exactly_that() {
        let fresh = node();
        let during = marked(&fresh);
        assert!(node_in_maintenance(&during));
        assert_eq!(
            during.record,
            Some(NodeRecord {
                maintenance: UID.into(),
                cordoned: false,
                drain_taint: false,
                unschedulable_taint: false,
                label: false,
                prior_unknown: false,
            })
        );
        assert_eq!(undone(&during, mine(), false), fresh);
    }

    #[test]
    fn a_node_cordoned_by_someone_else_stays_cordoned_with_its_taint() {
        let mut cordoned = node();
        cordoned.unschedulable = true;
        cordoned
            .taints
            .push(Taint::no_schedule(UNSCHEDULABLE_TAINT_KEY));
        let during = marked(&cordoned);
        let record = during.record.clone().unwrap();
        assert!(record.cordoned && record.unschedulable_taint && !record.drain_taint);
        let patch = maintenance_patch(&cordoned, &uid(), None, t(0)).unwrap();
        assert_eq!(patch.unschedulable, None, "already cordoned: left as it is");
        assert_eq!(undone(&during, mine(), false), cordoned);
    }

    #[test]
    fn a_label_set_by_a_person_stays() {
        let mut labelled = node();
        labelled
            .labels
            .insert(EXCLUDE_LABEL.into(), EXCLUDE_LABEL_VALUE.into());
        let during = marked(&labelled);
        assert!(during.record.as_ref().unwrap().label);
        assert_eq!(undone(&during, mine(), false), labelled);
    }

    #[test]
    fn a_node_never_changed_is_never_touched() {
        let mut cordoned = node();
        cordoned.unschedulable = true;
        cordoned
            .taints
            .push(Taint::no_schedule(UNSCHEDULABLE_TAINT_KEY));
        assert_eq!(undo_patch(&cordoned, mine(), false), None);
        assert_eq!(undo_patch(&cordoned, Undoer::Sweep, false), None);
        assert!(!marked_by(&cordoned, Undoer::Sweep));
    }

    #[test]
    fn another_maintenances_record_is_left_to_it_but_the_sweep_takes_it_back() {
        let during = marked(&node());
        assert_eq!(
            undo_patch(
                &during,
                Undoer::Maintenance {
                    uid: "other",
                    copy: None
                },
                false
            ),
            None
        );
        assert_eq!(undone(&during, Undoer::Sweep, false), node());
        // A new maintenance of the node never reuses the record: it makes its own from the
        // node as it is, which is in maintenance already, so what it had before is unknown.
        let patch = maintenance_patch(&during, &"other".into(), None, t(1)).unwrap();
        let RecordWrite::Set { record, .. } = patch.record else {
            panic!("the record is replaced");
        };
        assert_eq!(record.maintenance, "other");
        assert!(record.prior_unknown);
    }

    #[test]
    fn an_unrecorded_node_with_our_drain_taint_is_undone_like_the_go_operator_did() {
        let mut n = node();
        n.unschedulable = true;
        n.taints = with_maintenance_taints(&n.taints, t(0));
        n.labels.insert(EXCLUDE_LABEL.into(), "true".into());
        assert!(
            record_of(&n, &uid()).prior_unknown,
            "what the node had before is unknown"
        );
        assert_eq!(undone(&n, Undoer::Sweep, false), node());
    }

    #[test]
    fn with_another_lease_holder_only_what_is_nmos_alone_goes() {
        let during = marked(&node());
        let after = undone(&during, mine(), true);
        assert!(after.unschedulable, "the cordon serves the holder now");
        let keys: Vec<&str> = after.taints.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(keys, ["foreign", UNSCHEDULABLE_TAINT_KEY]);
        assert!(!after.labels.contains_key(EXCLUDE_LABEL));
        assert_eq!(after.record, None);
    }

    #[test]
    fn the_record_reads_back_from_its_annotation() {
        let record = record_of(&node(), &uid());
        let text = record.to_annotation();
        assert_eq!(
            text,
            r#"{"maintenance":"uid-nm1","cordoned":false,"drainTaint":false,"unschedulableTaint":false,"label":false}"#
        );
        assert_eq!(NodeRecord::from_annotation(&text), Some(record));
        assert_eq!(NodeRecord::from_annotation("garbage"), None);
    }
}
