//! Domain types shared by the actors and the [`crate::ports::Cluster`] port. They mirror the
//! Kubernetes objects nmo touches, reduced to the fields nmo reads or writes.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The NodeMaintenance finalizer (wire compatible with NMO).
pub const FINALIZER: &str = "foregroundDeleteNodeMaintenance";
/// Holder identity nmo writes into the node lease.
pub const LEASE_HOLDER: &str = "node-maintenance";
/// Node label that tells other medik8s operators to keep their hands off.
pub const EXCLUDE_LABEL: &str = "remediation.medik8s.io/exclude-from-remediation";
/// Value of [`EXCLUDE_LABEL`].
pub const EXCLUDE_LABEL_VALUE: &str = "true";
/// Taint key nmo adds to a node in maintenance.
pub const DRAIN_TAINT_KEY: &str = "medik8s.io/drain";
/// Taint key of the unschedulable taint nmo adds alongside the cordon.
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";
/// Effect of both nmo taints.
pub const NO_SCHEDULE: &str = "NoSchedule";
/// Node annotation with nmo's record of what a node had before nmo first changed it (see
/// [`NodeRecord`]).
pub const RECORD_ANNOTATION: &str = "nodemaintenance.medik8s.io/before-maintenance";
/// Annotation marking a mirror (static) pod.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Event reasons (wire compatible with NMO).
pub mod reasons {
    /// Maintenance started (on the NodeMaintenance).
    pub const BEGIN: &str = "BeginMaintenance";
    /// Drain finished (on the NodeMaintenance).
    pub const SUCCEED: &str = "SucceedMaintenance";
    /// Maintenance failed (on the NodeMaintenance).
    pub const FAILED: &str = "FailedMaintenance";
    /// Maintenance undone after deletion (on the NodeMaintenance).
    pub const REMOVED: &str = "RemovedMaintenance";
    /// nmo addition: the drain is blocked, and why (once per change of the class, on the
    /// NodeMaintenance; Warning).
    pub const DRAIN_BLOCKED: &str = "DrainBlocked";
    /// Node uncordoned (on the Node).
    pub const UNCORDON: &str = "UncordonNode";
    /// nmo addition: the maintenance waits for the cluster maintenance budget (on the
    /// NodeMaintenance). Its start is the usual [`BEGIN`].
    pub const QUEUED: &str = "QueuedMaintenance";
}

/// Status condition types nmo adds to the NodeMaintenance status.
pub mod conditions {
    /// True while nmo holds the node lease; False with reason [`LEASE_HELD_BY_OTHER`] while waiting.
    pub const LEASE_ACQUIRED: &str = "LeaseAcquired";
    /// True once every evictable pod is gone; False with a reason naming what blocks it.
    pub const DRAINED: &str = "Drained";
    /// Reason: another holder owns a valid lease.
    pub const LEASE_HELD_BY_OTHER: &str = "LeaseHeldByOther";
    /// Reason: the lease is ours.
    pub const LEASE_HELD: &str = "LeaseHeld";
    /// Reason: not started yet (e.g. waiting for the lease).
    pub const NOT_STARTED: &str = "NotStarted";
    /// Reason: pods are still being evicted.
    pub const PODS_PENDING: &str = "PodsPending";
    /// Reason: at least one pod is refused by a PodDisruptionBudget.
    pub const BLOCKED_BY_PDB: &str = "BlockedByPodDisruptionBudget";
    /// Reason: no evictable pod is left.
    pub const DRAIN_COMPLETE: &str = "DrainComplete";
    /// Reason: maintenance failed.
    pub const FAILED: &str = "Failed";
    /// True on a NodeMaintenance that is Failed because another one drives its node; such a
    /// NodeMaintenance never touches the node, not even after a restart.
    pub const DUPLICATE: &str = "DuplicateMaintenance";
    /// On a maintenance that gave up: False (reason [`UNDO_DUE`]) from the moment it is Failed
    /// until its node changes are undone, then True (reason [`RESTORED`]). Written with the
    /// Failed phase, before the undo, so a restart in between still undoes.
    pub const NODE_RESTORED: &str = "NodeRestored";
    /// Reason: the node changes are still to be undone.
    pub const UNDO_DUE: &str = "UndoDue";
    /// Reason: the node is as it was before the maintenance.
    pub const RESTORED: &str = "Restored";
    /// True while the drain is blocked by a PodDisruptionBudget, with the class of the blocker
    /// as its reason (e.g. `CrossNodeDeadlock`); absent otherwise.
    pub const DRAIN_BLOCKED: &str = "DrainBlocked";
    /// Reason of a False `Drained`: `spec.drainTimeout` passed before the drain finished.
    pub const DRAIN_TIMEOUT: &str = "DrainTimeout";
    /// True while the maintenance waits for the cluster maintenance budget (nothing touched
    /// yet); False with reason [`STARTED`] once it started. Absent when it never waited.
    pub const QUEUED: &str = "Queued";
    /// Reason: waiting for `--max-parallel-maintenances` or `--max-unavailable-nodes`.
    pub const WAITING_FOR_BUDGET: &str = "WaitingForBudget";
    /// Reason: the budget let the maintenance start.
    pub const STARTED: &str = "Started";
}

/// What happens when `spec.drainTimeout` passes before the drain finished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum OnDrainTimeout {
    /// Failed; the node stays cordoned for a person (the default).
    #[default]
    Hold,
    /// Failed, and the maintenance undone (node uncordoned, lease released).
    Undo,
}

impl OnDrainTimeout {
    /// The JSON value.
    pub fn as_str(self) -> &'static str {
        match self {
            OnDrainTimeout::Hold => "Hold",
            OnDrainTimeout::Undo => "Undo",
        }
    }
}

/// The opt-in drain deadline of a NodeMaintenance (`spec.drainTimeout`,
/// `spec.onDrainTimeout`). The default is NMO's behaviour: no deadline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainPolicy {
    /// How long the drain may take, from its start; None: as long as it takes.
    pub timeout: Option<Duration>,
    /// What a passed deadline does.
    pub on_timeout: OnDrainTimeout,
}

/// A NodeMaintenance object as the controller sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Maintenance {
    /// `metadata.name` (cluster scoped, so no namespace).
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion`; a change means "the object changed".
    pub resource_version: String,
    /// `spec.nodeName`.
    pub node_name: String,
    /// `spec.reason`.
    pub reason: String,
    /// `metadata.creationTimestamp`.
    pub creation_timestamp: DateTime<Utc>,
    /// True when `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `metadata.finalizers`.
    pub finalizers: Vec<String>,
    /// `status`, if any has been written.
    pub status: Option<MaintenanceStatus>,
    /// `spec.drainTimeout` and `spec.onDrainTimeout`.
    pub drain_policy: DrainPolicy,
}

impl Maintenance {
    /// True when nmo's finalizer is present.
    pub fn has_finalizer(&self) -> bool {
        self.finalizers.iter().any(|f| f == FINALIZER)
    }
}

/// `status.phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// Maintenance in progress (lease, cordon, drain).
    Running,
    /// Node drained.
    Succeeded,
    /// Maintenance gave up.
    Failed,
}

impl Phase {
    /// The JSON value of the phase.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
        }
    }
}

/// A `{namespace, name}` pod reference (`status.pendingPodsRefs` items).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PodRef {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
}

/// Why one pending pod is still on the node (nmo's addition to the status).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingPodReason {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// Short machine reason, e.g. `BlockedByPodDisruptionBudget`, `Evicting`, `Terminating`.
    pub reason: String,
    /// The PodDisruptionBudget refusing the eviction, when known.
    pub pdb: Option<String>,
    /// Human readable detail (for a PDB: the API's message with the budget's numbers).
    pub message: String,
    /// Why the budget blocks it, as a class (`WaitingForReplacement`, `CrossNodeDeadlock`...,
    /// see [`crate::diagnosis::Blocker::reason`]), when it is blocked.
    pub diagnosis: Option<String>,
}

/// A status condition (`metav1.Condition` shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    /// Condition type, see [`conditions`].
    pub type_: String,
    /// `"True"`, `"False"` or `"Unknown"`.
    pub status: String,
    /// CamelCase reason.
    pub reason: String,
    /// Human readable message.
    pub message: String,
    /// When `status` last changed.
    pub last_transition_time: DateTime<Utc>,
}

/// `status` of a NodeMaintenance: every NMO field plus nmo's additions.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MaintenanceStatus {
    /// `phase`.
    pub phase: Option<Phase>,
    /// `drainProgress` (0..100).
    pub drain_progress: i32,
    /// `lastUpdate`.
    pub last_update: Option<DateTime<Utc>>,
    /// `lastError` (None means absent/empty).
    pub last_error: Option<String>,
    /// `pendingPods` (bare names).
    pub pending_pods: Vec<String>,
    /// `pendingPodsRefs`.
    pub pending_pods_refs: Vec<PodRef>,
    /// `totalpods`.
    pub total_pods: i32,
    /// `evictionPods`.
    pub eviction_pods: i32,
    /// `errorOnLeaseCount`.
    pub error_on_lease_count: i32,
    /// `conditions` (nmo addition).
    pub conditions: Vec<Condition>,
    /// `pendingPodsReasons` (nmo addition): why each pending pod is still there.
    pub pending_pods_reasons: Vec<PendingPodReason>,
    /// `drainStartTime` (nmo addition): when the drain began (the base of the deadline).
    pub drain_start_time: Option<DateTime<Utc>>,
    /// `drainDeadline` (nmo addition): when `spec.drainTimeout` passes, while draining.
    pub drain_deadline: Option<DateTime<Utc>>,
    /// `drainTimeRemaining` (nmo addition): time left before the deadline while draining, as a
    /// Go duration (`29m`, `40s`), refreshed coarsely.
    pub drain_time_remaining: Option<String>,
    /// `queue` (nmo addition): where the maintenance waits for the cluster maintenance budget;
    /// None once it started (or when it never waited).
    pub queue: Option<QueuePlace>,
}

/// A maintenance's place in the queue of the cluster maintenance budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuePlace {
    /// 1 for the next to start.
    pub position: u32,
    /// What it waits for, in a few words (e.g. `max-parallel-maintenances: 20 of 20 running`).
    pub waiting_for: String,
}

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
    pub name: String,
    /// `metadata.uid` (for the lease's ownerReference and events).
    pub uid: String,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// `spec.taints` (empty when absent).
    pub taints: Vec<Taint>,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// nmo's record of what the node had before maintenance ([`RECORD_ANNOTATION`]), if any
    /// (an unreadable one counts as none).
    pub record: Option<NodeRecord>,
    /// The node has an annotation map at all (a JSON patch can only add a member to a map
    /// that exists).
    pub annotated: bool,
}

/// What a node had of nmo's changes before nmo first changed it, and for which maintenance.
///
/// Written on the Node, in the same JSON patch that makes the first change, so there is no
/// moment when the node is changed and the record missing (a crash can lose neither), and it
/// outlives its NodeMaintenance, so the orphan sweep can follow it when the NodeMaintenance
/// was removed behind nmo's back. Undo puts back exactly this and removes the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRecord {
    /// Uid of the NodeMaintenance the changes belong to.
    pub maintenance: String,
    /// `spec.unschedulable` was already true (someone else cordoned the node).
    pub cordoned: bool,
    /// The `medik8s.io/drain` taint was already there.
    pub drain_taint: bool,
    /// The `node.kubernetes.io/unschedulable` taint was already there.
    pub unschedulable_taint: bool,
    /// The exclude-from-remediation label was already `true`.
    pub label: bool,
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
    pub name: String,
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
    Deleted(String),
}

/// A change to a node: label + taints + cordon in one JSON patch.
///
/// The adapter builds the patch as: FIRST `test /spec/taints == expected_taints` (an absent or
/// null field counts as the empty list), then `replace`/`add` of `/spec/taints` with
/// `desired_taints`, `/spec/unschedulable` if `unschedulable` is Some, and one add/remove per
/// `labels` entry (Some = set, None = remove; removing an absent label is not an error), and
/// the write of nmo's record ([`RecordWrite`], the annotation [`RECORD_ANNOTATION`]; a record
/// that creates the annotation map first tests that it is absent). A failed `test` is reported
/// as [`crate::ports::ClusterError::Conflict`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePatch {
    /// Node name.
    pub node: String,
    /// The taints as last read; the patch fails if the server has anything else.
    pub expected_taints: Vec<Taint>,
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
    pub name: String,
    /// Node uid.
    pub uid: String,
}

/// `status.phase` of a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PodPhase {
    /// Not yet running.
    Pending,
    /// Running.
    Running,
    /// Finished successfully.
    Succeeded,
    /// Finished with failure.
    Failed,
    /// Unknown (node lost).
    Unknown,
}

/// The controller owner reference of a pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerRef {
    /// Owner kind, e.g. `DaemonSet`, `ReplicaSet`.
    pub kind: String,
    /// Owner name.
    pub name: String,
}

/// The parts of a Pod nmo reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodInfo {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `status.phase`.
    pub phase: PodPhase,
    /// The ownerReference with `controller: true`, if any.
    pub controller: Option<OwnerRef>,
    /// Has the annotation `kubernetes.io/config.mirror`.
    pub is_mirror: bool,
    /// Has at least one emptyDir volume.
    pub has_empty_dir: bool,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// `spec.terminationGracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `metadata.labels` (which budgets select it).
    pub labels: BTreeMap<String, String>,
    /// Its Ready condition is True (a budget counts it as healthy).
    pub ready: bool,
}

impl PodInfo {
    /// The pod's `{namespace, name}`.
    pub fn pod_ref(&self) -> PodRef {
        PodRef {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

/// What an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventTarget {
    /// A NodeMaintenance (kind `NodeMaintenance`, group `nodemaintenance.medik8s.io/v1beta1`).
    Maintenance {
        /// Object name.
        name: String,
        /// Object uid.
        uid: String,
    },
    /// A Node (kind `Node`, `v1`).
    Node {
        /// Node name.
        name: String,
        /// Node uid (empty if unknown).
        uid: String,
    },
}

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Normal event.
    Normal,
    /// Warning event.
    Warning,
}

/// A Kubernetes event to emit (namespace `default`, like NMO's events for cluster-scoped objects).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The object the event is about.
    pub target: EventTarget,
    /// Normal or Warning.
    pub type_: EventType,
    /// Reason, see [`reasons`].
    pub reason: String,
    /// Message.
    pub message: String,
}
