//! Conversions between Kubernetes objects and the actors' domain types.

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::{Lease as KubeLease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, Pod, Taint as KubeTaint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    Condition as KubeCondition, MicroTime, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::jiff::Timestamp;
use nmo_actors::model::{
    Condition, ConditionStatus, DrainPolicy, Lease, MIRROR_ANNOTATION, Maintenance,
    MaintenanceStatus, NodeOwner, NodeReady, NodeRecord, NodeState, OnDrainTimeout, OwnerRef,
    PendingPodReason, Phase, PodInfo, PodPhase, PodRef, QueuePlace, RECORD_ANNOTATION, Taint,
};

use crate::crd::{self, MaintenancePhase, NodeMaintenance, NodeMaintenanceStatus};

/// A Kubernetes timestamp as chrono's (the actors' clock type).
pub fn from_timestamp(ts: &Timestamp) -> DateTime<Utc> {
    // Both count nanoseconds since the Unix epoch; jiff's range fits chrono's.
    DateTime::from_timestamp(ts.as_second(), ts.subsec_nanosecond().unsigned_abs())
        .unwrap_or_default()
}

/// A chrono timestamp as a Kubernetes one.
pub fn to_timestamp(time: &DateTime<Utc>) -> Timestamp {
    // Below 2 * 10^9 even in a leap second, so it fits an i32.
    let nanos = i32::try_from(time.timestamp_subsec_nanos()).unwrap_or_default();
    Timestamp::new(time.timestamp(), nanos).unwrap_or_default()
}

fn time(value: &DateTime<Utc>) -> Time {
    Time(to_timestamp(value))
}

// --- NodeMaintenance ------------------------------------------------------------------------

/// The domain view of a NodeMaintenance.
pub fn maintenance(object: &NodeMaintenance) -> Maintenance {
    let meta = &object.metadata;
    Maintenance {
        name: meta.name.clone().unwrap_or_default().into(),
        uid: meta.uid.clone().unwrap_or_default().into(),
        resource_version: meta.resource_version.clone().unwrap_or_default(),
        node_name: object.spec.node_name.as_str().into(),
        reason: object.spec.reason.clone().unwrap_or_default(),
        creation_timestamp: meta
            .creation_timestamp
            .as_ref()
            .map(|t| from_timestamp(&t.0))
            .unwrap_or_default(),
        deleting: meta.deletion_timestamp.is_some(),
        finalizers: meta.finalizers.clone().unwrap_or_default(),
        status: object.status.as_ref().map(maintenance_status),
        drain_policy: drain_policy(&object.spec),
        invalid: crate::spec_checks::problem(&object.spec),
    }
}

/// `spec.drainTimeout` and `spec.onDrainTimeout`. A timeout that does not parse (the schema
/// and the webhook refuse one, but either may be missing) means no deadline: nmo never fails a
/// maintenance on a guess.
fn drain_policy(spec: &crd::NodeMaintenanceSpec) -> DrainPolicy {
    let timeout = spec.drain_timeout.as_deref().and_then(|value| {
        crate::drain_timeout::parse(value)
            .map_err(|error| tracing::warn!(%error, "ignoring spec.drainTimeout"))
            .ok()
    });
    DrainPolicy {
        timeout,
        on_timeout: match spec.on_drain_timeout {
            Some(crd::OnDrainTimeout::Undo) => OnDrainTimeout::Undo,
            Some(crd::OnDrainTimeout::Hold) | None => OnDrainTimeout::Hold,
        },
    }
}

fn phase(value: MaintenancePhase) -> Phase {
    match value {
        MaintenancePhase::Running => Phase::Running,
        MaintenancePhase::Succeeded => Phase::Succeeded,
        MaintenancePhase::Failed => Phase::Failed,
    }
}

fn crd_phase(value: Phase) -> MaintenancePhase {
    match value {
        Phase::Running => MaintenancePhase::Running,
        Phase::Succeeded => MaintenancePhase::Succeeded,
        Phase::Failed => MaintenancePhase::Failed,
    }
}

fn maintenance_status(status: &NodeMaintenanceStatus) -> MaintenanceStatus {
    MaintenanceStatus {
        phase: status.phase.map(phase),
        drain_progress: status.drain_progress.unwrap_or_default(),
        last_update: status.last_update.as_ref().map(|t| from_timestamp(&t.0)),
        last_error: status.last_error.clone().filter(|e| !e.is_empty()),
        pending_pods: status
            .pending_pods
            .iter()
            .flatten()
            .map(|name| name.as_str().into())
            .collect(),
        pending_pods_refs: status
            .pending_pods_refs
            .iter()
            .flatten()
            .map(|r| PodRef {
                namespace: r.namespace.as_str().into(),
                name: r.name.as_str().into(),
            })
            .collect(),
        total_pods: status.total_pods.unwrap_or_default(),
        eviction_pods: status.eviction_pods.unwrap_or_default(),
        error_on_lease_count: status.error_on_lease_count.unwrap_or_default(),
        conditions: status
            .conditions
            .iter()
            .flatten()
            .map(|c| Condition {
                type_: c.type_.clone(),
                status: ConditionStatus::parse(&c.status),
                reason: c.reason.clone(),
                message: c.message.clone(),
                last_transition_time: from_timestamp(&c.last_transition_time.0),
            })
            .collect(),
        pending_pods_reasons: status
            .pending_pods_reasons
            .iter()
            .flatten()
            .map(|r| PendingPodReason {
                namespace: r.namespace.as_str().into(),
                name: r.name.as_str().into(),
                reason: r.reason.clone(),
                pdb: r.pdb.clone(),
                message: r.message.clone(),
                diagnosis: r.diagnosis.clone(),
            })
            .collect(),
        drain_start_time: status
            .drain_start_time
            .as_ref()
            .map(|t| from_timestamp(&t.0)),
        drain_deadline: status.drain_deadline.as_ref().map(|t| from_timestamp(&t.0)),
        drain_time_remaining: status.drain_time_remaining.clone(),
        queue: status.queue.as_ref().map(|q| QueuePlace {
            position: u32::try_from(q.position).unwrap_or_default(),
            waiting_for: q.waiting_for.clone(),
        }),
        revision: status
            .status_revision
            .and_then(|revision| u64::try_from(revision).ok()),
        node_record: status.node_record.as_ref().map(|r| NodeRecord {
            maintenance: r.maintenance.as_str().into(),
            cordoned: r.cordoned,
            drain_taint: r.drain_taint,
            unschedulable_taint: r.unschedulable_taint,
            label: r.label,
            prior_unknown: r.prior_unknown,
        }),
    }
}

/// The CRD status for a domain status. Every field the Go operator knows is written, empty
/// lists and zero counts included, so that a merge patch replaces stale values.
pub fn crd_status(status: &MaintenanceStatus) -> NodeMaintenanceStatus {
    NodeMaintenanceStatus {
        phase: status.phase.map(crd_phase),
        drain_progress: Some(status.drain_progress),
        last_update: status.last_update.as_ref().map(time),
        last_error: Some(status.last_error.clone().unwrap_or_default()),
        pending_pods: Some(
            status
                .pending_pods
                .iter()
                .map(ToString::to_string)
                .collect(),
        ),
        pending_pods_refs: Some(
            status
                .pending_pods_refs
                .iter()
                .map(|r| crd::PodReference {
                    namespace: r.namespace.to_string(),
                    name: r.name.to_string(),
                })
                .collect(),
        ),
        total_pods: Some(status.total_pods),
        eviction_pods: Some(status.eviction_pods),
        error_on_lease_count: Some(status.error_on_lease_count),
        pending_pods_reasons: Some(
            status
                .pending_pods_reasons
                .iter()
                .map(|r| crd::PendingPodReason {
                    namespace: r.namespace.to_string(),
                    name: r.name.to_string(),
                    reason: r.reason.clone(),
                    pdb: r.pdb.clone(),
                    message: r.message.clone(),
                    diagnosis: r.diagnosis.clone(),
                })
                .collect(),
        ),
        conditions: Some(
            status
                .conditions
                .iter()
                .map(|c| KubeCondition {
                    type_: c.type_.clone(),
                    status: c.status.as_str().to_string(),
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                    last_transition_time: time(&c.last_transition_time),
                    observed_generation: None,
                })
                .collect(),
        ),
        drain_start_time: status.drain_start_time.as_ref().map(time),
        drain_deadline: status.drain_deadline.as_ref().map(time),
        drain_time_remaining: status.drain_time_remaining.clone(),
        queue: status.queue.as_ref().map(|q| crd::QueueStatus {
            position: i32::try_from(q.position).unwrap_or(i32::MAX),
            waiting_for: q.waiting_for.clone(),
        }),
        status_revision: status
            .revision
            .map(|revision| i64::try_from(revision).unwrap_or(i64::MAX)),
        node_record: status.node_record.as_ref().map(|r| crd::NodeRecordStatus {
            maintenance: r.maintenance.as_str().into(),
            cordoned: r.cordoned,
            drain_taint: r.drain_taint,
            unschedulable_taint: r.unschedulable_taint,
            label: r.label,
            prior_unknown: r.prior_unknown,
        }),
    }
}

// --- Node -----------------------------------------------------------------------------------

/// The domain view of a Node.
pub fn node_state(node: &Node) -> NodeState {
    let spec = node.spec.as_ref();
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| {
            node_ready(
                &c.status,
                c.last_transition_time.as_ref(),
                c.reason.as_deref(),
            )
        })
        .unwrap_or_default();
    NodeState {
        ready,
        ..node_state_of(
            &node.metadata,
            spec.and_then(|s| s.unschedulable),
            spec.and_then(|s| s.taints.as_deref()),
        )
    }
}

/// A Node's `Ready` condition, from its status, `lastTransitionTime` and reason (shared by the
/// whole Node and the slim one of the node watch).
pub fn node_ready(status: &str, since: Option<&Time>, reason: Option<&str>) -> NodeReady {
    NodeReady {
        status: Some(ConditionStatus::parse(status)),
        since: since.map(|t| from_timestamp(&t.0)),
        reason: reason.map(str::to_string),
    }
}

/// The domain view of a Node from the parts nmo reads: its metadata, `spec.unschedulable` and
/// `spec.taints` (shared by the whole Node and the slim one of the node watch).
pub fn node_state_of(
    metadata: &ObjectMeta,
    unschedulable: Option<bool>,
    taints: Option<&[KubeTaint]>,
) -> NodeState {
    let annotation = metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RECORD_ANNOTATION));
    let record = annotation.and_then(|value| NodeRecord::from_annotation(value));
    NodeState {
        name: metadata.name.clone().unwrap_or_default().into(),
        uid: metadata.uid.clone().unwrap_or_default().into(),
        unschedulable: unschedulable.unwrap_or(false),
        taints: taints.unwrap_or_default().iter().map(taint).collect(),
        labels: metadata.labels.clone().unwrap_or_default(),
        resource_version: metadata.resource_version.clone().unwrap_or_default(),
        unreadable_record: annotation.is_some() && record.is_none(),
        record,
        annotated: metadata.annotations.is_some(),
        ready: NodeReady::default(),
    }
}

fn taint(value: &KubeTaint) -> Taint {
    Taint {
        key: value.key.clone(),
        value: value.value.clone(),
        effect: value.effect.clone(),
        time_added: value.time_added.as_ref().map(|t| from_timestamp(&t.0)),
    }
}

/// A domain taint as the API writes it.
pub fn kube_taint(value: &Taint) -> KubeTaint {
    KubeTaint {
        key: value.key.clone(),
        value: value.value.clone(),
        effect: value.effect.clone(),
        time_added: value.time_added.as_ref().map(time),
    }
}

// --- Pod ------------------------------------------------------------------------------------

/// The domain view of a Pod.
pub fn pod_info(pod: &Pod) -> PodInfo {
    let spec = pod.spec.as_ref();
    pod_info_of(
        &pod.metadata,
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        spec.and_then(|s| s.termination_grace_period_seconds),
        spec.and_then(|s| s.volumes.as_ref())
            .is_some_and(|volumes| volumes.iter().any(|v| v.empty_dir.is_some())),
        pod_condition(pod, "Ready").is_some_and(|c| c.status == "True"),
    )
}

/// The drain's view of a pod from what it reads of one: shared by whole Pods and the pod
/// watch's slim ones (`super::slim_pod`), so the two cannot drift apart.
pub(super) fn pod_info_of(
    meta: &ObjectMeta,
    phase: Option<&str>,
    grace_period_seconds: Option<i64>,
    has_empty_dir: bool,
    ready: bool,
) -> PodInfo {
    let phase = match phase {
        Some("Running") => PodPhase::Running,
        Some("Succeeded") => PodPhase::Succeeded,
        Some("Failed") => PodPhase::Failed,
        Some("Unknown") => PodPhase::Unknown,
        _ => PodPhase::Pending,
    };
    PodInfo {
        namespace: meta.namespace.as_deref().unwrap_or_default().into(),
        name: meta.name.as_deref().unwrap_or_default().into(),
        uid: meta.uid.clone().unwrap_or_default().into(),
        phase,
        controller: meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| OwnerRef {
                kind: o.kind.clone(),
                name: o.name.clone(),
                uid: o.uid.as_str().into(),
            }),
        is_mirror: meta
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION)),
        has_empty_dir,
        terminating: meta.deletion_timestamp.is_some(),
        grace_period_seconds,
        labels: super::shared_labels::shared(meta.labels.as_ref()),
        ready,
    }
}

/// A pod's status condition of a type.
pub fn pod_condition<'a>(
    pod: &'a Pod,
    type_: &str,
) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_))
}

// --- Lease ----------------------------------------------------------------------------------

/// The domain view of a Lease.
pub fn lease(value: &KubeLease) -> Lease {
    let spec = value.spec.clone().unwrap_or_default();
    Lease {
        namespace: value.metadata.namespace.clone().unwrap_or_default(),
        name: value.metadata.name.clone().unwrap_or_default(),
        holder_identity: spec.holder_identity,
        lease_duration_seconds: spec.lease_duration_seconds,
        acquire_time: spec.acquire_time.as_ref().map(|t| from_timestamp(&t.0)),
        renew_time: spec.renew_time.as_ref().map(|t| from_timestamp(&t.0)),
        lease_transitions: spec.lease_transitions,
        resource_version: value.metadata.resource_version.clone().unwrap_or_default(),
    }
}

/// A domain lease as the API writes it; with `owner`, owned by that Node so it is garbage
/// collected with it.
pub fn kube_lease(value: &Lease, owner: Option<&NodeOwner>) -> KubeLease {
    let micro = |t: &DateTime<Utc>| MicroTime(to_timestamp(t));
    KubeLease {
        metadata: ObjectMeta {
            name: Some(value.name.clone()),
            namespace: Some(value.namespace.clone()),
            resource_version: Some(value.resource_version.clone()).filter(|v| !v.is_empty()),
            owner_references: owner.map(|node| {
                vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Node".into(),
                    name: node.name.to_string(),
                    uid: node.uid.to_string(),
                    ..OwnerReference::default()
                }]
            }),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: value.holder_identity.clone(),
            lease_duration_seconds: value.lease_duration_seconds,
            acquire_time: value.acquire_time.as_ref().map(micro),
            renew_time: value.renew_time.as_ref().map(micro),
            lease_transitions: value.lease_transitions,
            ..LeaseSpec::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_survive_the_trip_between_clock_types() {
        let now = DateTime::parse_from_rfc3339("2026-11-29T10:00:05.123456Z")
            .expect("valid")
            .with_timezone(&Utc);
        assert_eq!(from_timestamp(&to_timestamp(&now)), now);
    }

    #[test]
    fn a_status_keeps_every_field_through_the_crd_type() {
        let status = MaintenanceStatus {
            phase: Some(Phase::Running),
            drain_progress: 40,
            last_update: Some(DateTime::from_timestamp(1_800_000_000, 0).expect("valid")),
            last_error: Some("blocked by web".into()),
            pending_pods: vec!["web-1".into()].into(),
            pending_pods_refs: vec![PodRef {
                namespace: "shop".into(),
                name: "web-1".into(),
            }]
            .into(),
            total_pods: 7,
            eviction_pods: 5,
            error_on_lease_count: 1,
            conditions: vec![],
            pending_pods_reasons: vec![PendingPodReason {
                namespace: "shop".into(),
                name: "web-1".into(),
                reason: "BlockedByPodDisruptionBudget".into(),
                pdb: Some("web".into()),
                message: "needs 2 has 2".into(),
                diagnosis: Some("WaitingForReplacement".into()),
            }]
            .into(),
            drain_start_time: Some(DateTime::from_timestamp(1_799_999_000, 0).expect("valid")),
            drain_deadline: Some(DateTime::from_timestamp(1_800_001_000, 0).expect("valid")),
            drain_time_remaining: Some("17m".into()),
            queue: Some(QueuePlace {
                position: 3,
                waiting_for: "max-parallel-maintenances: 2 of 2 running".into(),
            }),
            revision: Some(12),
            node_record: Some(NodeRecord {
                maintenance: "uid-1".into(),
                cordoned: true,
                drain_taint: false,
                unschedulable_taint: true,
                label: false,
                prior_unknown: false,
            }),
        };
        assert_eq!(maintenance_status(&crd_status(&status)), status);
    }
}
