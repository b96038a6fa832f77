//! A NodeMaintenance as the actors see it: its spec, its status and the words it uses
//! (event reasons, condition types).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::ids::{MaintenanceName, NodeName, Uid};
use super::names::FINALIZER;
use super::node::NodeRecord;

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
    /// nmo addition (on the Node; Warning): nmo's record of the node's prior state was gone
    /// mid-maintenance and was written again from the NodeMaintenance's copy.
    pub const RECORD_MISSING: &str = "RecordMissing";
    /// nmo addition (on the Node; Warning): the record's annotation was not a record; replaced.
    pub const RECORD_UNREADABLE: &str = "RecordUnreadable";
    /// nmo addition (on the Node; Warning): the record was another maintenance's; replaced.
    pub const RECORD_FOREIGN: &str = "RecordForeign";
    /// nmo addition (on the Node; Warning): the record said otherwise than the
    /// NodeMaintenance's copy; written again from the copy.
    pub const RECORD_ALTERED: &str = "RecordAltered";
    /// nmo addition (on the Node; Warning): a node was undone without knowing what it had
    /// before its maintenance: every mark of a maintenance was taken off.
    pub const PRIOR_STATE_UNKNOWN: &str = "PriorStateUnknown";
    /// nmo addition (on the NodeMaintenance; Warning): another holder's node lease was renewed
    /// further ahead of nmo's clock than clock skew explains, and was taken over as expired.
    pub const BOGUS_LEASE: &str = "BogusLeaseRenewTime";
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
    /// Reason of a False `Drained` on a maintenance failed by an older nmo, whatever the
    /// failure (this one names it, see [`super::FailureKind`]).
    pub const FAILED: &str = "Failed";
    /// Reason of a False `Drained`: the node does not exist.
    pub const NODE_NOT_FOUND: &str = "NodeNotFound";
    /// Reason of a False `Drained`: the node lease could not be kept.
    pub const LEASE_LOST: &str = "LeaseLost";
    /// Reason of a False `Drained`: the spec breaks the limits of the CRD's schema.
    pub const INVALID_SPEC: &str = "InvalidSpec";
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
    /// True once nmo recorded what the node had before this maintenance changed it (reason
    /// [`RECORDED`], or [`RECORD_REPLACED`] when the record found on the node was another
    /// maintenance's, unreadable, lost or altered, and was replaced); False with reason
    /// [`PRIOR_STATE_UNKNOWN`] when the node was already in maintenance without a record.
    pub const PRIOR_STATE_RECORDED: &str = "PriorStateRecorded";
    /// Reason: the record was made from the node as it was.
    pub const RECORDED: &str = "Recorded";
    /// Reason: the record found on the node was not this maintenance's own, and was replaced.
    pub const RECORD_REPLACED: &str = "RecordReplaced";
    /// Reason: the node was already in maintenance, with no record, when this maintenance took
    /// it over: its undo takes off every mark of a maintenance.
    pub const PRIOR_STATE_UNKNOWN: &str = "PriorStateUnknown";
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
    pub name: MaintenanceName,
    /// `metadata.uid`.
    pub uid: Uid,
    /// `metadata.resourceVersion`; a change means "the object changed".
    pub resource_version: String,
    /// `spec.nodeName`.
    pub node_name: NodeName,
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
    /// What is wrong with the spec, if anything (nmo's own check of the limits the CRD's
    /// schema sets, for an object created before the schema had them): such a maintenance is
    /// Failed before it touches anything.
    #[serde(default)]
    pub invalid: Option<SpecProblem>,
}

/// A field of a NodeMaintenance's spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SpecField {
    /// `spec.nodeName`.
    NodeName,
    /// `spec.reason`.
    Reason,
    /// `spec.drainTimeout`.
    DrainTimeout,
}

/// What is wrong with a NodeMaintenance's spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpecProblem {
    /// The field.
    pub field: SpecField,
    /// What is wrong, naming the field (the `lastError` of the Failed maintenance).
    pub message: String,
}

impl Maintenance {
    /// True when nmo's finalizer is present.
    pub fn has_finalizer(&self) -> bool {
        self.finalizers.iter().any(|f| f == FINALIZER)
    }

    /// A copy without its status's pod lists (the bulk of a maintenance being drained).
    pub fn without_pod_lists(&self) -> Maintenance {
        Maintenance {
            status: self.status.as_ref().map(|status| MaintenanceStatus {
                pending_pods: Arc::default(),
                pending_pods_refs: Arc::default(),
                pending_pods_reasons: Arc::default(),
                ..status.clone()
            }),
            ..self.clone()
        }
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

/// A `{namespace, name}` pod reference (`status.pendingPodsRefs` items). Its text is shared
/// (`Arc<str>`): a pod's reference is a key in the drain's maps, the eviction queue and their
/// reports, and a clone is a count, not two new strings.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PodRef {
    /// Pod namespace.
    pub namespace: Arc<str>,
    /// Pod name.
    pub name: Arc<str>,
}

/// Why one pending pod is still on the node (nmo's addition to the status).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingPodReason {
    /// Pod namespace (shared with its [`PodRef`]).
    pub namespace: Arc<str>,
    /// Pod name (shared with its [`PodRef`]).
    pub name: Arc<str>,
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

/// Why a maintenance failed, as its status keeps it: the reason of its False `Drained`
/// condition, so that a restarted nmo (or a new leader) knows it from what the API holds, not
/// from the words of `lastError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// The node does not exist ([`conditions::NODE_NOT_FOUND`]).
    NodeMissing,
    /// The node lease could not be kept ([`conditions::LEASE_LOST`]).
    LeaseLost,
    /// `spec.drainTimeout` passed before the drain finished ([`conditions::DRAIN_TIMEOUT`]).
    DrainTimeout,
    /// The spec breaks the limits of the CRD's schema ([`conditions::INVALID_SPEC`]).
    InvalidSpec,
}

impl FailureKind {
    /// The reason of the False `Drained` condition that says it.
    pub fn reason(self) -> &'static str {
        match self {
            FailureKind::NodeMissing => conditions::NODE_NOT_FOUND,
            FailureKind::LeaseLost => conditions::LEASE_LOST,
            FailureKind::DrainTimeout => conditions::DRAIN_TIMEOUT,
            FailureKind::InvalidSpec => conditions::INVALID_SPEC,
        }
    }

    /// The kind a `Drained` reason says; None for any other reason (among them
    /// [`conditions::FAILED`], an older nmo's, which says no kind).
    pub fn from_reason(reason: &str) -> Option<Self> {
        [
            FailureKind::NodeMissing,
            FailureKind::LeaseLost,
            FailureKind::DrainTimeout,
            FailureKind::InvalidSpec,
        ]
        .into_iter()
        .find(|kind| kind.reason() == reason)
    }
}

/// A condition's `status`: `True`, `False` or `Unknown`, as `metav1.Condition` has it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConditionStatus {
    /// `"True"`.
    True,
    /// `"False"`.
    False,
    /// `"Unknown"`; also any other text found in the API (the CRD's schema does not forbid
    /// it): neither True nor False is all nmo can tell of it.
    #[default]
    #[serde(other)]
    Unknown,
}

impl ConditionStatus {
    /// `True` or `False`.
    pub fn of(holds: bool) -> Self {
        if holds {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }
    }

    /// The condition's status as the API reads it; text other than `True` and `False` is
    /// `Unknown`.
    pub fn parse(text: &str) -> Self {
        match text {
            "True" => ConditionStatus::True,
            "False" => ConditionStatus::False,
            _ => ConditionStatus::Unknown,
        }
    }

    /// The JSON value.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

impl From<&str> for ConditionStatus {
    fn from(text: &str) -> Self {
        ConditionStatus::parse(text)
    }
}

/// Compared with the API's text (`"True"`...).
impl PartialEq<str> for ConditionStatus {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ConditionStatus {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A status condition (`metav1.Condition` shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    /// Condition type, see [`conditions`].
    pub type_: String,
    /// True, False or Unknown.
    pub status: ConditionStatus,
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
    /// `pendingPods` (bare names). The pod lists are shared by every copy of a status (the
    /// one wanted, the one being written, the one written): at 500 drains of 30 pods each
    /// copy of them cost about 6 MiB.
    pub pending_pods: Arc<[Arc<str>]>,
    /// `pendingPodsRefs`.
    pub pending_pods_refs: Arc<[PodRef]>,
    /// `totalpods`.
    pub total_pods: i32,
    /// `evictionPods`.
    pub eviction_pods: i32,
    /// `errorOnLeaseCount`.
    pub error_on_lease_count: i32,
    /// `conditions` (nmo addition).
    pub conditions: Vec<Condition>,
    /// `pendingPodsReasons` (nmo addition): why each pending pod is still there.
    pub pending_pods_reasons: Arc<[PendingPodReason]>,
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
    /// `statusRevision` (nmo addition): counts nmo's writes of this status. Each write is
    /// conditional on the revision its writer last saw (see [`StatusPrecondition`]), so a
    /// write that arrives late, from a replica that lost its leadership meanwhile, fails
    /// instead of undoing a newer one. None on a status nmo never wrote.
    pub revision: Option<u64>,
    /// `nodeRecord` (nmo addition): nmo's own copy of the record it keeps on the node of what
    /// the node had before this maintenance first changed it (see [`NodeRecord`]). Only nmo
    /// writes it: a record lost or altered on the node is written again from it, and the
    /// undo follows it.
    pub node_record: Option<NodeRecord>,
}

/// What a status write is conditional on: the status as its writer last saw it. The write
/// lands only if the API still has that status; otherwise it fails as a conflict, and the
/// writer reads the status again before it writes anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusPrecondition {
    /// The object has no status at all.
    Absent,
    /// The status has this `statusRevision` (None: a status without one, e.g. the Go
    /// operator's).
    Revision(Option<u64>),
}

impl StatusPrecondition {
    /// The precondition of a write over `seen` (None: no status seen).
    pub fn over(seen: Option<&MaintenanceStatus>) -> Self {
        match seen {
            None => StatusPrecondition::Absent,
            Some(status) => StatusPrecondition::Revision(status.revision),
        }
    }

    /// The revision of the status a write over this precondition writes.
    pub fn next_revision(self) -> u64 {
        match self {
            StatusPrecondition::Absent | StatusPrecondition::Revision(None) => 1,
            StatusPrecondition::Revision(Some(seen)) => seen.saturating_add(1),
        }
    }
}

/// A maintenance's place in the queue of the cluster maintenance budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuePlace {
    /// 1 for the next to start.
    pub position: u32,
    /// What it waits for, in a few words (e.g. `max-parallel-maintenances: 20 of 20 running`).
    pub waiting_for: String,
}
