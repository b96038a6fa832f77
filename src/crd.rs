//! The `NodeMaintenance` custom resource, wire compatible with the medik8s Node Maintenance
//! Operator (`nodemaintenance.medik8s.io/v1beta1`).
//!
//! Field names follow the Go operator's JSON tags exactly (`totalpods` is lower case there), so
//! objects written by either operator can be read by the other. Doc comments on the fields become
//! the descriptions in the generated CRD.
//!
//! Unknown fields are tolerated on read (ignored, never an error): an object written by a newer
//! operator must not stop nmo from undoing its maintenance. They are never erased either, because
//! nmo writes status field by field, only the fields it knows (`cluster::status_patch`).

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::core::CustomResourceExt;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The finalizer nmo (and the Go operator) puts on every NodeMaintenance, so that the node is
/// restored before the object goes away.
pub use nmo_actors::model::FINALIZER;

// The limits of a spec, which the schema below enforces and `crate::spec_checks` checks again
// for objects from before the schema.

/// The longest node name (a DNS-1123 subdomain).
pub const NODE_NAME_MAX_LENGTH: usize = 253;
/// The longest `spec.reason`, in characters. (nmo's spans and log lines carry at most 256 of
/// them, whatever the object holds.)
pub const REASON_MAX_LENGTH: usize = 1024;
/// The longest `spec.drainTimeout`.
pub const DRAIN_TIMEOUT_MAX: Duration = Duration::from_secs(720 * 3600);
/// The same, as the CRD's validation rule writes it.
pub const DRAIN_TIMEOUT_MAX_TEXT: &str = "720h";
/// The longest `spec.drainTimeout` text.
pub const DRAIN_TIMEOUT_MAX_LENGTH: usize = 32;
/// The form of a DNS-1123 subdomain, as the schema checks it.
pub const DNS1123_SUBDOMAIN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// The desired state of a NodeMaintenance.
// Each `printcolumn(...)` repeats the same keys, which clippy mistakes for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, Default, KubeSchema)]
#[kube(
    group = "nodemaintenance.medik8s.io",
    version = "v1beta1",
    kind = "NodeMaintenance",
    plural = "nodemaintenances",
    singular = "nodemaintenance",
    shortname = "nm",
    status = "NodeMaintenanceStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "NodeMaintenance puts a node into maintenance: cordoned, tainted and drained, until the object is deleted.",
    printcolumn(
        name = "Node",
        type_ = "string",
        json_path = ".spec.nodeName",
        description = "The node in maintenance"
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Running, Succeeded or Failed"
    ),
    printcolumn(
        name = "Progress",
        type_ = "integer",
        json_path = ".status.drainProgress",
        description = "Percentage of the pods to evict that are gone"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".spec.reason",
        description = "Why the node is in maintenance"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Queue",
        type_ = "integer",
        json_path = ".status.queue.position",
        description = "Place in the cluster maintenance queue while waiting to start, 1 next (kubectl get -o wide)",
        priority = 1
    ),
    printcolumn(
        name = "Waiting For",
        type_ = "string",
        json_path = ".status.queue.waitingFor",
        description = "What a queued maintenance waits for (kubectl get -o wide)",
        priority = 1
    ),
    printcolumn(
        name = "Blocked",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"DrainBlocked\")].reason",
        description = "Why the drain is stuck, while it is (kubectl get -o wide)",
        priority = 1
    ),
    printcolumn(
        name = "Error",
        type_ = "string",
        json_path = ".status.lastError",
        description = "The latest error of the maintenance (kubectl get -o wide)",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct NodeMaintenanceSpec {
    /// Node name to apply maintenance on (a node's name: a DNS-1123 subdomain). Immutable once
    /// the object is created.
    #[schemars(length(min = 1, max = NODE_NAME_MAX_LENGTH))]
    #[schemars(pattern(DNS1123_SUBDOMAIN))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("updating spec.NodeName isn't allowed"))]
    pub node_name: String,
    /// Reason for the maintenance (at most 1024 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = REASON_MAX_LENGTH))]
    pub reason: Option<String>,
    /// nmo addition, optional: how long the drain may take (a Go duration such as `30m` or
    /// `1h30m`), counted from its start. When it passes before the drain finished, the
    /// maintenance is Failed, naming what blocked it, and `onDrainTimeout` says what happens to
    /// the node. A pod a PodDisruptionBudget protects is never deleted for it. Unset: the drain
    /// takes as long as it takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(crate::drain_timeout::PATTERN))]
    #[schemars(length(max = DRAIN_TIMEOUT_MAX_LENGTH))]
    #[x_kube(validation = Rule::new("duration(self) <= duration('720h')").message("spec.drainTimeout must be at most 720h"))]
    pub drain_timeout: Option<String>,
    /// nmo addition, optional: what a passed `drainTimeout` does. `Hold` (the default): the
    /// node stays cordoned for a person to look at. `Undo`: the maintenance is undone (the node
    /// uncordoned, the lease released); the NodeMaintenance stays, Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_drain_timeout: Option<OnDrainTimeout>,
}

/// nmo addition, optional: what a passed `drainTimeout` does. `Hold` (the default): the node
/// stays cordoned for a person to look at. `Undo`: the maintenance is undone (the node
/// uncordoned, the lease released); the NodeMaintenance stays, Failed.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
pub enum OnDrainTimeout {
    /// Failed; the node stays cordoned for a person.
    Hold,
    /// Failed, and the maintenance undone.
    Undo,
}

/// The observed state of a NodeMaintenance, with the Go operator's field names.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeMaintenanceStatus {
    /// Phase is the state of the maintenance: Running, Succeeded or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<MaintenancePhase>,
    /// Percentage of the pods to evict that have been removed (0 to 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_progress: Option<i32>,
    /// The last time the status was updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update: Option<Time>,
    /// The latest error, if any, of the maintenance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Names of the pods that still have to leave the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_pods: Option<Vec<String>>,
    /// References (namespace and name) of the pods that still have to leave the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_pods_refs: Option<Vec<PodReference>>,
    /// Number of pods on the node when the maintenance began.
    #[serde(rename = "totalpods", default, skip_serializing_if = "Option::is_none")]
    pub total_pods: Option<i32>,
    /// Number of pods to evict when the maintenance began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_pods: Option<i32>,
    /// Number of failures to take or keep the node lease once evictions began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_on_lease_count: Option<i32>,
    /// nmo addition: for each pod still pending, why it has not left yet (for example the
    /// PodDisruptionBudget that refuses its eviction, with the budget's numbers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_pods_reasons: Option<Vec<PendingPodReason>>,
    /// nmo addition: standard conditions (for example whether nmo waits for the node lease or
    /// is draining), so a waiting maintenance is distinguishable from a draining one.
    /// `DrainBlocked` is True while a PodDisruptionBudget holds the drain up, with the reason
    /// (`WaitingForReplacement`, `ReplacementUnschedulable`, `CrossNodeDeadlock`,
    /// `StructuralBudget`, `MultipleBudgets`, `BudgetExhausted`) and what to do in its message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// nmo addition: when the drain began (`drainTimeout` counts from here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_start_time: Option<Time>,
    /// nmo addition: when `drainTimeout` passes, while draining with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_deadline: Option<Time>,
    /// nmo addition: the time left before `drainTimeout` passes, while draining with one
    /// (refreshed about once a minute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_time_remaining: Option<String>,
    /// nmo addition: while the maintenance waits for the cluster maintenance budget
    /// (`--max-parallel-maintenances`, `--max-unavailable-nodes`), its place in the queue and
    /// what it waits for; absent once it started. A waiting maintenance touches nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueStatus>,
    /// nmo addition: counts nmo's writes of this status. Each write is conditional on the
    /// revision its writer last saw, so a write that arrives late (from a replica that lost
    /// its leadership meanwhile) is refused instead of undoing a newer one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_revision: Option<i64>,
    /// nmo addition: nmo's own copy of the record it keeps on the node (annotation
    /// `nodemaintenance.medik8s.io/before-maintenance`) of what the node had before this
    /// maintenance first changed it. Only nmo writes it: a record lost or altered on the node
    /// is written again from it, and the undo restores what it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_record: Option<NodeRecordStatus>,
}

/// nmo addition: what a node had of a maintenance's marks before the maintenance first
/// changed it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeRecordStatus {
    /// Uid of the NodeMaintenance the record belongs to.
    pub maintenance: String,
    /// The node was already cordoned (by someone else): it stays cordoned.
    #[serde(default)]
    pub cordoned: bool,
    /// The `medik8s.io/drain` taint was already there: it stays.
    #[serde(default)]
    pub drain_taint: bool,
    /// The `node.kubernetes.io/unschedulable` taint was already there: it stays.
    #[serde(default)]
    pub unschedulable_taint: bool,
    /// The `remediation.medik8s.io/exclude-from-remediation` label was already there: it
    /// stays.
    #[serde(default)]
    pub label: bool,
    /// What the node had before is unknown (it was already in maintenance, with no record,
    /// when this maintenance took it over): the undo takes off every mark of a maintenance, as
    /// the Go operator's does.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prior_unknown: bool,
}

/// nmo addition: a maintenance's place in the cluster maintenance queue.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatus {
    /// 1 for the next maintenance to start.
    pub position: i32,
    /// What the queue waits for, e.g. `max-parallel-maintenances: 20 of 20 running`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub waiting_for: String,
}

/// The phase of a maintenance.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
pub enum MaintenancePhase {
    /// The node is being (or waiting to be) put into maintenance.
    Running,
    /// The node is cordoned, tainted and drained.
    Succeeded,
    /// The maintenance cannot proceed; `lastError` says why.
    Failed,
}

/// A reference to a pod, as the Go operator writes it in `pendingPodsRefs`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, JsonSchema)]
pub struct PodReference {
    /// Namespace of the pod.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name of the pod.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// nmo addition: a pending pod and why it is still on the node.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, JsonSchema)]
pub struct PendingPodReason {
    /// Namespace of the pod.
    pub namespace: String,
    /// Name of the pod.
    pub name: String,
    /// Why the pod is still there, in one word, e.g. `BlockedByPodDisruptionBudget`,
    /// `Evicting`, `Terminating`.
    pub reason: String,
    /// The PodDisruptionBudget refusing the eviction, when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pdb: Option<String>,
    /// The detail, e.g. the API's message with the budget's numbers, or why the budget blocks.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Why the budget blocks it, as a class: `WaitingForReplacement`,
    /// `ReplacementUnschedulable`, `CrossNodeDeadlock`, `StructuralBudget`, `MultipleBudgets`
    /// or `BudgetExhausted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<String>,
}

/// The CustomResourceDefinition of NodeMaintenance, as `deploy/base/crd.yaml` holds it.
pub fn definition() -> CustomResourceDefinition {
    NodeMaintenance::crd()
}

/// The CRD rendered as YAML, exactly what `nmo crd` prints and `deploy/base/crd.yaml` contains.
pub fn definition_yaml() -> Result<String, serde_yaml::Error> {
    serde_yaml::to_string(&definition())
}
