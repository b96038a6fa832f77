//! A KubeVirt VirtualMachineInstance as the drain reads it (kubevirt.io/v1, read only, only
//! where the API exists): how it is evicted and where its live migration stands.

use chrono::{DateTime, Utc};

use super::maintenance::ConditionStatus;

/// A condition of a VMI (its `LiveMigratable`, say).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VmCondition {
    /// `True` or `False` (text other than those: `Unknown`).
    pub status: ConditionStatus,
    /// KubeVirt's reason (e.g. `DisksNotLiveMigratable`).
    pub reason: Option<String>,
    /// KubeVirt's message.
    pub message: Option<String>,
}

/// `status.migrationState` of a VMI: its latest live migration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VmMigration {
    /// The node it migrates to.
    pub target_node: Option<String>,
    /// When it started.
    pub started: Option<DateTime<Utc>>,
    /// When it ended.
    pub ended: Option<DateTime<Utc>>,
    /// It succeeded.
    pub completed: bool,
    /// It failed.
    pub failed: bool,
    /// The domain is ready on the target node (`targetNodeDomainReadyTimestamp`): the last
    /// step before the switch-over, the only progress KubeVirt shows on the VMI.
    pub target_ready: bool,
}

impl VmMigration {
    /// Started and not ended.
    pub fn running(&self) -> bool {
        !self.completed && !self.failed
    }
}

/// A VirtualMachineInstance.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VmInfo {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.evictionStrategy` (`LiveMigrate`, `LiveMigrateIfPossible`, `External`, `None`;
    /// absent: the cluster's default).
    pub eviction_strategy: Option<String>,
    /// The `LiveMigratable` condition, when KubeVirt reports one.
    pub migratable: Option<VmCondition>,
    /// `status.evacuationNodeName`: an eviction marked it for evacuation from this node.
    pub evacuation_node: Option<String>,
    /// `status.migrationState`.
    pub migration: Option<VmMigration>,
    /// `status.nodeName`.
    pub node: Option<String>,
}

/// The VMIs on a node, as their watch lists them.
pub type VmList = Vec<VmInfo>;
