//! A pod as the drain sees it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::maintenance::PodRef;

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
