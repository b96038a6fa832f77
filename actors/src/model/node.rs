//! A node as the actors see it: its taints, nmo's record of it, what the shared node watch
//! tells, the patch nmo sends, and its lease.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::ids::{NodeName, Uid};
use super::maintenance::ConditionStatus;
use super::names::NO_SCHEDULE;

/// A node taint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value, if any.
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
    /// `timeAdded` (kept as-is so the `test` op of a patch compares what the server has).
    pub time_added: Option<DateTime<Utc>>,
}

impl Taint {
    /// A `key:NoSchedule` taint without value.
    pub fn no_schedule(key: &str) -> Self {
        Taint {
            key: key.to_string(),
            value: None,
            effect: NO_SCHEDULE.to_string(),
            time_added: None,
        }
    }

    /// Same key and effect (Kubernetes' identity of a taint).
    pub fn same_as(&self, other: &Taint) -> bool {
        self.key == other.key && self.effect == other.effect
    }
}

/// The parts of a Node nmo reads.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NodeState {
    /// `metadata.name`.
    pub name: NodeName,
    /// `metadata.uid` (for the lease's ownerReference and events).
    pub uid: Uid,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// `spec.taints` (empty when absent).
    pub taints: Vec<Taint>,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// nmo's record of what the node had before maintenance ([`super::RECORD_ANNOTATION`]), if any
    /// (an unreadable one counts as none, see `unreadable_record`).
    pub record: Option<NodeRecord>,
    /// The record's annotation is there but is not a record (garbled, or written by hand).
    pub unreadable_record: bool,
    /// The node has an annotation map at all (a JSON patch can only add a member to a map
    /// that exists).
    pub annotated: bool,
    /// Its `Ready` condition (a kubelet that is gone finishes no terminating pod).
    pub ready: NodeReady,
}

/// A node's `Ready` condition as nmo reads it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NodeReady {
    /// `True`, `False` or `Unknown`; None: the node reports no `Ready` condition.
    pub status: Option<ConditionStatus>,
    /// `lastTransitionTime`: since when it says so.
    pub since: Option<DateTime<Utc>>,
    /// Its `reason` (e.g. `NodeStatusUnknown`, `KubeletNotReady`).
    pub reason: Option<String>,
}

impl NodeReady {
    /// A node whose kubelet answers.
    pub fn ready() -> Self {
        NodeReady {
            status: Some(ConditionStatus::True),
            since: None,
            reason: None,
        }
    }

    /// `False` or `Unknown`: no kubelet finishes its pods.
    pub fn is_down(&self) -> bool {
        matches!(
            self.status,
            Some(ConditionStatus::False | ConditionStatus::Unknown)
        )
    }
}

/// What a node had of nmo's changes before nmo first changed it, and for which maintenance.
///
/// Written on the Node, in the same JSON patch that makes the first change, so there is no
/// moment when the node is changed and the record missing (a crash can lose neither), and it
/// outlives its NodeMaintenance, so the orphan sweep can follow it when the NodeMaintenance
/// was removed behind nmo's back. A copy that only nmo writes is kept in the NodeMaintenance's
/// status (`status.nodeRecord`): while the NodeMaintenance exists, that copy is what a lost or
/// altered record is written again from and what the undo follows. Undo puts back exactly
/// this and removes the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRecord {
    /// Uid of the NodeMaintenance the changes belong to.
    pub maintenance: Uid,
    /// `spec.unschedulable` was already true (someone else cordoned the node).
    pub cordoned: bool,
    /// The `medik8s.io/drain` taint was already there.
    pub drain_taint: bool,
    /// The `node.kubernetes.io/unschedulable` taint was already there.
    pub unschedulable_taint: bool,
    /// The exclude-from-remediation label was already `true`.
    pub label: bool,
    /// What the node had before is not known: the node was already in maintenance, with no
    /// record, when this maintenance took it over (from the Go operator, say). Its undo takes
    /// off every mark of a maintenance, as the Go operator's does; the flags above say nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prior_unknown: bool,
}

impl NodeRecord {
    /// The annotation's value.
    pub fn to_annotation(&self) -> String {
        // A struct of strings and booleans always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads an annotation's value; None if it is not a record.
    pub fn from_annotation(value: &str) -> Option<NodeRecord> {
        serde_json::from_str(value).ok()
    }
}

/// What a node patch does to nmo's record on the node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RecordWrite {
    /// Leaves it as it is.
    #[default]
    Keep,
    /// Writes this record (the node's annotation map exists or not, as `annotated` says).
    Set {
        /// The record.
        record: NodeRecord,
        /// The node has an annotation map (else the patch creates one, testing it is absent).
        annotated: bool,
    },
    /// Removes the record.
    Remove,
}

/// What the cluster maintenance budget needs to know of a node: a few bytes per node, so that
/// counting unavailable nodes never means caching every Node (10-15 KiB each).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSummary {
    /// `metadata.name`.
    pub name: NodeName,
    /// Condition `Ready` is `True`.
    pub ready: bool,
    /// `spec.unschedulable` (cordoned, by anyone).
    pub unschedulable: bool,
}

impl NodeSummary {
    /// NotReady or cordoned: out of service, whoever took it out.
    pub fn unavailable(&self) -> bool {
        !self.ready || self.unschedulable
    }
}

/// A change in the cluster's nodes, as the node summary watch reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeSummaryEvent {
    /// Every node, after the watch's (re)list: replaces what was known.
    Listed(Vec<NodeSummary>),
    /// A node was added or changed.
    Changed(NodeSummary),
    /// A node is gone.
    Deleted(NodeName),
}

/// A change to a node: label + taints + cordon in one JSON patch.
///
/// The adapter builds the patch as: FIRST `test /spec/taints == expected_taints` (an absent or
/// null field counts as the empty list) and `test /metadata/resourceVersion ==
/// expected_version` (when known), then `replace`/`add` of `/spec/taints` with
/// `desired_taints`, `/spec/unschedulable` if `unschedulable` is Some, and one add/remove per
/// `labels` entry (Some = set, None = remove; removing an absent label is not an error), and
/// the write of nmo's record ([`RecordWrite`], the annotation [`super::RECORD_ANNOTATION`]; a record
/// that creates the annotation map first tests that it is absent). A failed `test` is reported
/// as [`crate::ports::ClusterError::Conflict`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePatch {
    /// Node name.
    pub node: NodeName,
    /// The taints as last read; the patch fails if the server has anything else.
    pub expected_taints: Vec<Taint>,
    /// `metadata.resourceVersion` of the node the patch was computed from (empty: unknown):
    /// the patch fails if the node changed since in any way, so a patch that arrives late
    /// (sent by a replica that lost its leadership meanwhile) never undoes a newer change,
    /// even one that put back the taints it tested.
    pub expected_version: String,
    /// The complete taint list to write.
    pub desired_taints: Vec<Taint>,
    /// New `spec.unschedulable`, or None to leave it.
    pub unschedulable: Option<bool>,
    /// Labels to set (Some) or remove (None).
    pub labels: BTreeMap<String, Option<String>>,
    /// nmo's record of the node's prior state.
    pub record: RecordWrite,
}

/// A `coordination.k8s.io/v1` Lease.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Lease {
    /// Namespace (see [`crate::config::defaults::LEASE_NAMESPACE`]).
    pub namespace: String,
    /// Name (`node-<nodeName>`).
    pub name: String,
    /// `spec.holderIdentity`.
    pub holder_identity: Option<String>,
    /// `spec.leaseDurationSeconds`.
    pub lease_duration_seconds: Option<i32>,
    /// `spec.acquireTime`.
    pub acquire_time: Option<DateTime<Utc>>,
    /// `spec.renewTime`.
    pub renew_time: Option<DateTime<Utc>>,
    /// `spec.leaseTransitions`.
    pub lease_transitions: Option<i32>,
    /// `metadata.resourceVersion` (ignored on create, required on update).
    pub resource_version: String,
}

/// The Node a lease is owned by (ownerReference `v1/Node`, so the lease is garbage collected
/// with the Node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOwner {
    /// Node name.
    pub name: NodeName,
    /// Node uid.
    pub uid: Uid,
}
