//! nmo's record of a node's prior state (see [`NodeRecord`]): which record a maintenance
//! keeps on its node, and what an undo puts back.
//!
//! The rules, each against a way the record can mislead:
//! - A record is made from the node as it is, when the maintenance first changes it. One of
//!   another maintenance is never reused (the node may have been undone by someone else since,
//!   the Go operator after a rollback say, and cordoned again by a person): it is replaced.
//! - A record is never made from a node that already carries a maintenance's marks: what the
//!   node had before is then unknown, and the record says so (`prior_unknown`). Its undo takes
//!   off every mark of a maintenance, as the Go operator's does.
//! - While the NodeMaintenance exists, its status keeps a copy only nmo writes: a record lost,
//!   garbled or altered on the node is written again from the copy, and the undo follows it.
//! - Anything replaced is reported ([`RecordFinding`]), for an event and a condition.

use crate::model::{
    DRAIN_TAINT_KEY, EXCLUDE_LABEL, EXCLUDE_LABEL_VALUE, NodeRecord, NodeState, RecordWrite, Taint,
    UNSCHEDULABLE_TAINT_KEY, Uid, reasons,
};

fn has_label(node: &NodeState) -> bool {
    node.labels.get(EXCLUDE_LABEL).map(String::as_str) == Some(EXCLUDE_LABEL_VALUE)
}

pub(super) fn has_taint(node: &NodeState, key: &str) -> bool {
    node.taints
        .iter()
        .any(|t| t.same_as(&Taint::no_schedule(key)))
}

/// The record `maintenance` makes of the node as it is now. A node that already carries
/// nmo's drain taint is in maintenance already (the Go operator's, or one nmo lost track
/// of): what it had before is unknown, and the record says so. Nothing else sets that taint,
/// so a node cordoned by someone else (a remediation operator, a person) is recorded as
/// cordoned, and stays so after the maintenance.
pub fn record_of(node: &NodeState, maintenance: &Uid) -> NodeRecord {
    if has_taint(node, DRAIN_TAINT_KEY) {
        return NodeRecord {
            maintenance: maintenance.clone(),
            cordoned: false,
            drain_taint: false,
            unschedulable_taint: false,
            label: false,
            prior_unknown: true,
        };
    }
    NodeRecord {
        maintenance: maintenance.clone(),
        cordoned: node.unschedulable,
        drain_taint: false,
        unschedulable_taint: has_taint(node, UNSCHEDULABLE_TAINT_KEY),
        label: has_label(node),
        prior_unknown: false,
    }
}

/// What was wrong with the record a maintenance found on its node, and replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordFinding {
    /// The record was gone (removed while the maintenance ran): written again from the
    /// maintenance's copy.
    Missing,
    /// The annotation was not a record.
    Unreadable,
    /// A record of another maintenance (its uid).
    Foreign(Uid),
    /// A record naming this maintenance but saying otherwise than its copy.
    Altered,
}

impl RecordFinding {
    /// The reason of the event that says it (one per kind: events of one reason about one
    /// object are counted as a series of the first, whose message they keep).
    pub fn reason(&self) -> &'static str {
        match self {
            RecordFinding::Missing => reasons::RECORD_MISSING,
            RecordFinding::Unreadable => reasons::RECORD_UNREADABLE,
            RecordFinding::Foreign(_) => reasons::RECORD_FOREIGN,
            RecordFinding::Altered => reasons::RECORD_ALTERED,
        }
    }

    /// What was found, in words.
    pub fn describe(&self) -> String {
        match self {
            RecordFinding::Missing => "the record of its prior state was gone".to_string(),
            RecordFinding::Unreadable => "the record of its prior state was unreadable".to_string(),
            RecordFinding::Foreign(uid) => {
                format!("the record of its prior state was another maintenance's (uid {uid})")
            }
            RecordFinding::Altered => "the record of its prior state had been altered".to_string(),
        }
    }
}

/// The record a maintenance keeps on its node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The record the node carries for the maintenance once the patch is written.
    pub record: NodeRecord,
    /// How the patch writes it.
    pub write: RecordWrite,
    /// What was wrong with the record found, if anything.
    pub finding: Option<RecordFinding>,
}

/// The record `maintenance` keeps on `node`, given its own copy (`copy`, from its status):
/// the copy when it has one, else the node's record if it is the maintenance's own, else a new
/// one from the node as it is ([`record_of`]).
pub fn claim(node: &NodeState, maintenance: &Uid, copy: Option<&NodeRecord>) -> Claim {
    let copy = copy.filter(|c| c.maintenance == *maintenance);
    let found = node.record.as_ref();
    let replaced = |found: Option<&NodeRecord>| match found {
        Some(found) if found.maintenance != *maintenance => {
            Some(RecordFinding::Foreign(found.maintenance.clone()))
        }
        Some(_) => Some(RecordFinding::Altered),
        None if node.unreadable_record => Some(RecordFinding::Unreadable),
        None => None,
    };
    let set = |record: &NodeRecord| RecordWrite::Set {
        record: record.clone(),
        annotated: node.annotated,
    };
    match (copy, found) {
        (Some(copy), Some(found)) if found == copy => Claim {
            record: copy.clone(),
            write: RecordWrite::Keep,
            finding: None,
        },
        (Some(copy), found) => Claim {
            record: copy.clone(),
            write: set(copy),
            finding: replaced(found).or(Some(RecordFinding::Missing)),
        },
        (None, Some(found)) if found.maintenance == *maintenance => Claim {
            // Written with the node's first change; its copy is on its way to the status.
            record: found.clone(),
            write: RecordWrite::Keep,
            finding: None,
        },
        (None, found) => {
            let record = record_of(node, maintenance);
            Claim {
                write: set(&record),
                record,
                finding: replaced(found),
            }
        }
    }
}

/// What the node had of a maintenance's marks before it (the record's flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Prior {
    pub(super) cordoned: bool,
    pub(super) drain_taint: bool,
    pub(super) unschedulable_taint: bool,
    pub(super) label: bool,
}

impl Prior {
    /// Nothing was there: every mark goes.
    const NONE: Prior = Prior {
        cordoned: false,
        drain_taint: false,
        unschedulable_taint: false,
        label: false,
    };

    fn of(record: &NodeRecord) -> Prior {
        if record.prior_unknown {
            return Prior::NONE;
        }
        Prior {
            cordoned: record.cordoned,
            drain_taint: record.drain_taint,
            unschedulable_taint: record.unschedulable_taint,
            label: record.label,
        }
    }
}

/// What an undo takes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restore {
    /// Puts back the node's state before the maintenance (what was there stays), and removes
    /// the record.
    Known(PriorState),
    /// What the node had before is unknown: every mark of a maintenance goes, as the Go
    /// operator's undo does, and the record.
    Unknown,
    /// Only the record goes: the marks it speaks of are already gone (someone else undid the
    /// node), or it is unreadable on a node without nmo's marks.
    RecordOnly,
}

/// The node's state before a maintenance, as an undo restores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriorState(pub(super) Prior);

/// Whose changes an undo takes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undoer<'a> {
    /// The NodeMaintenance with this uid: only its own changes (another maintenance's, or a
    /// node it never changed, are left alone), following its own copy of the record when it
    /// has one.
    Maintenance {
        /// Its uid.
        uid: &'a str,
        /// Its copy of the record (from its status).
        copy: Option<&'a NodeRecord>,
    },
    /// The orphan sweep: whatever record the node carries (its NodeMaintenance is gone).
    Sweep,
}

/// What an undo by `undoer` takes back of `node`, or None when nothing of its is there.
///
/// A maintenance follows its copy of the record, else the node's record of its own; with
/// neither, a node carrying nmo's drain taint was marked by an operator that kept no record
/// (the Go operator): everything of a maintenance goes. A copy whose record is gone from a node
/// without the drain taint it added says the undo already happened: nothing.
///
/// The sweep follows the node's record, except one whose maintenance's drain taint is gone:
/// someone undid the node since (the Go operator, after a rollback, leaves nmo's record
/// behind), and what the node has now (a person's cordon, say) is not nmo's to take.
pub fn restore(node: &NodeState, undoer: Undoer<'_>) -> Option<Restore> {
    let drain_tainted = has_taint(node, DRAIN_TAINT_KEY);
    let follow = |record: &NodeRecord| {
        if record.prior_unknown {
            Restore::Unknown
        } else {
            Restore::Known(PriorState(Prior::of(record)))
        }
    };
    let marks_gone =
        |record: &NodeRecord| !record.prior_unknown && !record.drain_taint && !drain_tainted;
    let without_record = || {
        if drain_tainted {
            Some(Restore::Unknown)
        } else if node.unreadable_record {
            Some(Restore::RecordOnly)
        } else {
            None
        }
    };
    match undoer {
        Undoer::Maintenance { uid, copy } => {
            let copy = copy.filter(|c| c.maintenance == uid);
            match (&node.record, copy) {
                (Some(found), _) if found.maintenance != uid => None,
                (Some(found), copy) => Some(follow(copy.unwrap_or(found))),
                (None, Some(copy)) if !marks_gone(copy) => Some(follow(copy)),
                (None, Some(_)) => node.unreadable_record.then_some(Restore::RecordOnly),
                (None, None) => without_record(),
            }
        }
        Undoer::Sweep => match &node.record {
            Some(found) if marks_gone(found) => Some(Restore::RecordOnly),
            Some(found) => Some(follow(found)),
            None => without_record(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "uid-nm1";

    fn uid() -> Uid {
        UID.into()
    }

    fn node() -> NodeState {
        NodeState::test("n1").at_version("1")
    }

    fn marked(mut node: NodeState) -> NodeState {
        node.unschedulable = true;
        node.taints = vec![
            Taint::no_schedule(DRAIN_TAINT_KEY),
            Taint::no_schedule(UNSCHEDULABLE_TAINT_KEY),
        ];
        node.labels
            .insert(EXCLUDE_LABEL.into(), EXCLUDE_LABEL_VALUE.into());
        node
    }

    fn record(uid: &str, cordoned: bool) -> NodeRecord {
        NodeRecord {
            maintenance: uid.into(),
            cordoned,
            drain_taint: false,
            unschedulable_taint: cordoned,
            label: false,
            prior_unknown: false,
        }
    }

    #[test]
    fn a_record_of_another_maintenance_is_replaced_from_the_node_as_it_is() {
        // Undone by the Go operator (which leaves nmo's record), then cordoned by a person.
        let mut cordoned = node();
        cordoned.unschedulable = true;
        cordoned.record = Some(record("uid-gone", false));
        let claim = super::claim(&cordoned, &uid(), None);
        assert_eq!(claim.record, record(UID, false).clone_with_cordon());
        assert_eq!(
            claim.finding,
            Some(RecordFinding::Foreign("uid-gone".into()))
        );
        assert!(matches!(claim.write, RecordWrite::Set { .. }));
    }

    #[test]
    fn a_marked_node_without_a_record_is_recorded_as_unknown_never_as_clean() {
        let adopted = marked(node());
        let claim = super::claim(&adopted, &uid(), None);
        assert!(claim.record.prior_unknown);
        assert_eq!(claim.finding, None);
        let mut garbled = marked(node());
        garbled.unreadable_record = true;
        let claim = super::claim(&garbled, &uid(), None);
        assert!(claim.record.prior_unknown);
        assert_eq!(claim.finding, Some(RecordFinding::Unreadable));
    }

    #[test]
    fn a_lost_or_altered_record_is_written_again_from_the_copy() {
        let copy = record(UID, true);
        let mut lost = marked(node());
        let claim = super::claim(&lost, &uid(), Some(&copy));
        assert_eq!(claim.record, copy);
        assert_eq!(claim.finding, Some(RecordFinding::Missing));
        lost.record = Some(record(UID, false));
        let claim = super::claim(&lost, &uid(), Some(&copy));
        assert_eq!(claim.record, copy);
        assert_eq!(claim.finding, Some(RecordFinding::Altered));
        lost.record = Some(copy.clone());
        let claim = super::claim(&lost, &uid(), Some(&copy));
        assert_eq!(claim.write, RecordWrite::Keep);
        assert_eq!(claim.finding, None);
    }

    #[test]
    fn the_undo_follows_the_copy_and_leaves_another_maintenances_node_alone() {
        let copy = record(UID, true);
        let mut during = marked(node());
        during.record = Some(record(UID, false));
        let undoer = Undoer::Maintenance {
            uid: UID,
            copy: Some(&copy),
        };
        assert_eq!(
            restore(&during, undoer),
            Some(Restore::Known(PriorState(Prior::of(&copy))))
        );
        during.record = Some(record("other", false));
        assert_eq!(restore(&during, undoer), None);
        // The record and the drain taint it added are gone: the undo already happened.
        let mut undone = node();
        undone.unschedulable = true;
        assert_eq!(restore(&undone, undoer), None);
    }

    #[test]
    fn the_sweep_leaves_what_someone_else_put_on_a_node_undone_behind_its_back() {
        let mut stale = node();
        stale.unschedulable = true;
        stale.record = Some(record("uid-gone", false));
        assert_eq!(restore(&stale, Undoer::Sweep), Some(Restore::RecordOnly));
        let mut orphan = marked(node());
        orphan.record = Some(record("uid-gone", false));
        assert!(matches!(
            restore(&orphan, Undoer::Sweep),
            Some(Restore::Known(_))
        ));
        orphan.record = None;
        assert_eq!(restore(&orphan, Undoer::Sweep), Some(Restore::Unknown));
        let mut garbled = node();
        garbled.unreadable_record = true;
        assert_eq!(restore(&garbled, Undoer::Sweep), Some(Restore::RecordOnly));
        assert_eq!(restore(&node(), Undoer::Sweep), None);
    }

    impl NodeRecord {
        fn clone_with_cordon(&self) -> NodeRecord {
            NodeRecord {
                cordoned: true,
                ..self.clone()
            }
        }
    }

    #[test]
    fn an_old_record_reads_back_and_a_known_one_is_written_as_before() {
        let old = r#"{"maintenance":"u","cordoned":true,"drainTaint":false,"unschedulableTaint":true,"label":false}"#;
        let read = NodeRecord::from_annotation(old).expect("a record");
        assert!(!read.prior_unknown);
        assert_eq!(read.to_annotation(), old);
        let unknown = NodeRecord {
            prior_unknown: true,
            ..read
        };
        assert!(unknown.to_annotation().contains(r#""priorUnknown":true"#));
    }
}
