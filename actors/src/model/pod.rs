//! A pod as the drain sees it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::ids::Uid;
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

/// A pod's labels, shared by every copy of the pod (cloning one is a reference count).
pub type Labels = Arc<BTreeMap<String, String>>;

/// A node's pods as listed or watched. Each pod is shared: the pod watch hands out a fresh
/// list on every change and a drain pass takes it, so copying one copies pointers, not pods,
/// and a pod unchanged since the last list is the same allocation (`Arc::ptr_eq`).
pub type PodList = Vec<Arc<PodInfo>>;

/// The controller owner reference of a pod.

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerRef {
    /// Owner kind, e.g. `DaemonSet`, `ReplicaSet`.
    pub kind: String,
    /// Owner name.
    pub name: String,
    /// Owner uid (empty if unknown): one of the same name created again is another owner.
    #[serde(default)]
    pub uid: Uid,
}

/// The parts of a Pod nmo reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodInfo {
    /// Namespace (shared with the pod's [`PodRef`]s).
    pub namespace: Arc<str>,
    /// Name (shared with the pod's [`PodRef`]s).
    pub name: Arc<str>,
    /// `metadata.uid`.
    pub uid: Uid,
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
    /// `metadata.labels` (which budgets select it), shared: a pod's labels travel from the pod
    /// watch to the drain and the eviction queue, and at 500 drains of 30 pods each copy of
    /// every pod's map cost ~10 MiB (a B-tree node is ~0.5 KiB however few labels it holds).
    pub labels: Labels,
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
