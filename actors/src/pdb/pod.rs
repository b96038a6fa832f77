//! A pod as a PDB sees it: what its health and its placement depend on (the diagnosis of a
//! blocked drain reads these; the cluster port delivers them).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::{OwnerRef, PodPhase, PodRef, Taint};

/// A pod toleration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Toleration {
    /// Taint key; empty with `exists` tolerates every taint.
    pub key: String,
    /// `operator: Exists` (else `Equal`).
    pub exists: bool,
    /// Value for `Equal`.
    pub value: String,
    /// Effect; empty tolerates every effect.
    pub effect: String,
}

impl Toleration {
    /// Whether this toleration tolerates `taint` (the scheduler's rule).
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if !self.effect.is_empty() && self.effect != taint.effect {
            return false;
        }
        if self.key.is_empty() {
            return self.exists;
        }
        self.key == taint.key
            && (self.exists || self.value == taint.value.clone().unwrap_or_default())
    }
}

/// A pod selected by a PDB, with what placing it depends on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PdbPod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Its controller.
    pub controller: Option<OwnerRef>,
    /// `status.phase`.
    pub phase: PodPhase,
    /// Its Ready condition is True.
    pub ready: bool,
    /// Being deleted.
    pub terminating: bool,
    /// `spec.nodeName`, once scheduled.
    pub node_name: Option<String>,
    /// The scheduler's message when it found no node (`PodScheduled` False, `Unschedulable`).
    pub unschedulable: Option<String>,
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// `spec.tolerations`.
    pub tolerations: Vec<Toleration>,
}

impl PdbPod {
    /// Its `{namespace, name}`.
    pub fn pod_ref(&self) -> PodRef {
        PodRef {
            namespace: self.namespace.as_str().into(),
            name: self.name.as_str().into(),
        }
    }

    /// Not healthy yet and on its way to be: what a PDB short of healthy pods waits for.
    pub(crate) fn awaited(&self) -> bool {
        !self.ready
            && !self.terminating
            && !matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
    }
}
