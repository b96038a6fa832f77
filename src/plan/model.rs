//! What `nmo plan` works from (facts read from the cluster) and what it answers (per node, per
//! pod, and the blockers), as plain data: the analysis is a pure function between the two.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use nmo_actors::model::PodInfo;
use nmo_actors::pdb::Pdb;
use serde::Serialize;

use crate::crd::NodeMaintenance;

/// A node as the plan sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeFacts {
    /// Name.
    pub name: String,
    /// Condition `Ready` is `True`.
    pub ready: bool,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// Has a `NoSchedule` or `NoExecute` taint (other than the ones a cordon brings).
    pub tainted: bool,
    /// Carries a control-plane role label.
    pub control_plane: bool,
}

impl NodeFacts {
    /// Could take a replacement pod: Ready, not cordoned, no taint keeping pods off (a
    /// workload tolerating the taint could still go there; the plan does not guess).
    pub fn schedulable(&self) -> bool {
        self.ready && !self.unschedulable && !self.tainted
    }
}

/// A pod on a planned node.
#[derive(Debug, Clone)]
pub struct PodFacts {
    /// What the drain reads of it, labels included (the actors' own classification and
    /// PDB matching use this).
    pub info: PodInfo,
    /// It requires one pod of its kind per node (a required pod anti-affinity on
    /// `kubernetes.io/hostname` that selects its own labels).
    pub one_per_node: bool,
}

/// Everything the plan is made from.
#[derive(Debug, Clone, Default)]
pub struct PlanInput {
    /// The nodes to plan, in the order given (named first, then selected).
    pub planned: Vec<String>,
    /// Every node of the cluster, by name.
    pub nodes: BTreeMap<String, NodeFacts>,
    /// The pods on each planned node.
    pub pods: BTreeMap<String, Vec<PodFacts>>,
    /// Every PodDisruptionBudget, as the drain's eviction gating reads them.
    pub pdbs: Vec<Pdb>,
    /// The DaemonSets (`namespace`, `name`) that own pods on the planned nodes and exist.
    pub daemonsets: BTreeSet<(String, String)>,
    /// The NodeMaintenances that exist (the control-plane rule counts them).
    pub maintenances: Vec<NodeMaintenance>,
    /// The PodDisruptionBudgets of `openshift-etcd` (the etcd quorum guard, on OpenShift).
    pub etcd_pdbs: Vec<PodDisruptionBudget>,
    /// The etcd guard pods on planned control-plane nodes (read when the guard allows no
    /// disruption).
    pub guard_pods: Vec<Pod>,
    /// The admission webhooks on `pods/eviction` (empty when none, or when they could not be
    /// read).
    pub eviction_webhooks: nmo_actors::interception::EvictionWebhooks,
    /// The VirtualMachineInstances of the launcher pods on the planned nodes (where KubeVirt
    /// is installed).
    pub vms: super::interceptors::Vms,
}

/// What the drain would do with a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Action {
    /// Evicted through the Eviction API (PDBs apply).
    Evict,
    /// Deleted without ceremony (finished, or an orphan of a gone DaemonSet).
    Delete,
    /// Left alone (DaemonSet-managed, mirror).
    Skip,
    /// Already terminating: waited for.
    Wait,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Evict => "evict",
            Action::Delete => "delete",
            Action::Skip => "skip",
            Action::Wait => "wait",
        })
    }
}

/// A PDB covering a pod, with its headroom now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PdbHeadroom {
    /// `namespace/name`.
    #[serde(rename = "budget")]
    pub pdb: String,
    /// Disruptions it allows now.
    pub disruptions_allowed: i32,
    /// Its pods on the planned nodes: more than it allows means evictions wait for
    /// replacements to become healthy.
    pub pods_on_planned_nodes: usize,
}

/// One pod and what happens to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodPlan {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// What the drain does.
    pub action: Action,
    /// Why, in words.
    pub why: String,
    /// The PDBs that cover it (only for evicted pods).
    #[serde(rename = "budgets")]
    pub pdbs: Vec<PdbHeadroom>,
    /// Who sees its eviction besides its PDB: admission webhooks on `pods/eviction` (by
    /// name), or KubeVirt for a launcher pod. nmo asks such a pod whatever its PDB says, and
    /// again until it leaves.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub interceptors: Vec<String>,
    /// For a KubeVirt launcher pod: what its eviction does to the VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vm: Option<super::interceptors::VmPlan>,
}

/// One planned node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePlan {
    /// Name.
    pub node: String,
    /// Its state now, in a few words (`Ready`, `NotReady, cordoned`, `not found`).
    pub state: String,
    /// Its pods.
    pub pods: Vec<PodPlan>,
}

/// Something that will stop the drain, predicted before it starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Blocker {
    /// A planned node does not exist (the webhook refuses its NodeMaintenance).
    NodeMissing {
        /// The node.
        node: String,
    },
    /// A PDB that can never allow a disruption as it is written or as its pods are.
    StructuralBudget {
        /// `namespace/name`.
        #[serde(rename = "budget")]
        pdb: String,
        /// Why.
        why: String,
        /// Its pods on the planned nodes.
        pods: Vec<String>,
    },
    /// A pod covered by several PDBs: the Eviction API refuses it (500) whatever they
    /// allow.
    SeveralBudgets {
        /// `namespace/name` of the pod.
        pod: String,
        /// The PDBs.
        #[serde(rename = "budgets")]
        pdbs: Vec<String>,
    },
    /// Evictions wait for replacements that cannot start once the planned nodes are cordoned
    /// together: a cross-node deadlock.
    NowhereToGo {
        /// `namespace/name` of the PDB.
        #[serde(rename = "budget")]
        pdb: String,
        /// Why the replacements cannot start.
        why: String,
    },
    /// A KubeVirt VM that must live-migrate and cannot: KubeVirt refuses its eviction.
    VmCannotMigrate {
        /// `namespace/name` of the VMI.
        vm: String,
        /// Its `LiveMigratable` condition.
        migratable: String,
    },
    /// Putting these control-plane nodes into maintenance may cost etcd its quorum: the
    /// webhook refuses it.
    Quorum {
        /// The control-plane node.
        node: String,
        /// The webhook's refusal.
        message: String,
    },
}

impl fmt::Display for Blocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blocker::NodeMissing { node } => {
                write!(
                    f,
                    "node {node} does not exist: its NodeMaintenance is refused"
                )
            }
            Blocker::StructuralBudget { pdb, why, pods } => write!(
                f,
                "PodDisruptionBudget {pdb}: {why}, so {} cannot be evicted (a person must change the budget or move the workload)",
                pods.join(", ")
            ),
            Blocker::SeveralBudgets { pod, pdbs } => write!(
                f,
                "pod {pod} is covered by {} PodDisruptionBudgets ({}): the Eviction API refuses pods under more than one",
                pdbs.len(),
                pdbs.join(", ")
            ),
            Blocker::NowhereToGo { pdb, why } => {
                write!(f, "cross-node deadlock on PodDisruptionBudget {pdb}: {why}")
            }
            Blocker::VmCannotMigrate { vm, migratable } => write!(
                f,
                "VM {vm} must live-migrate (evictionStrategy LiveMigrate) and cannot (LiveMigratable {migratable}): KubeVirt refuses its eviction"
            ),
            Blocker::Quorum { node, message } => write!(f, "control-plane node {node}: {message}"),
        }
    }
}

/// The answer of `nmo plan`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Per planned node.
    pub nodes: Vec<NodePlan>,
    /// What will block, if anything.
    pub blockers: Vec<Blocker>,
}

impl Plan {
    /// Nothing predicted to block.
    pub fn clear(&self) -> bool {
        self.blockers.is_empty()
    }
}
