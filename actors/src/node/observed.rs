//! What a drain observes beyond the eviction actor's answers, and what that makes of its pods'
//! reasons:
//! - a node whose `Ready` condition is `False` or `Unknown` has no kubelet to finish its
//!   terminating pods, so those wait for ever; the drain says so (`NodeNotReady`) instead of
//!   "Terminating". Nothing is force-deleted.
//! - a KubeVirt launcher pod is said in KubeVirt's words, from its VirtualMachineInstance: the
//!   VM is live-migrating (to which node, since when), or cannot migrate (KubeVirt's reason).

use std::collections::BTreeMap;

use super::pending::{PendingPod, PendingReason, PodReason};
use crate::diagnosis::Blocker;
use crate::interception::{VMI_KIND, pod_is_virt_launcher};
use crate::model::{ConditionStatus, NodeReady, PodRef, VmInfo, VmList};

/// The drain's observations and the reasons they give its pods.
#[derive(Debug, Default)]
pub(super) struct Observed {
    node: String,
    ready: NodeReady,
    /// The VMIs on the node, by `(namespace, name)`.
    vms: BTreeMap<(String, String), VmInfo>,
    reasons: BTreeMap<PodRef, PodReason>,
}

/// What a VM's own state says of its launcher pod on `node`, if anything.
fn vm_blocker(vm: &VmInfo, node: &str) -> Option<Blocker> {
    let name = format!("{}/{}", vm.namespace, vm.name);
    if let Some(migration) = vm.migration.as_ref().filter(|m| m.running()) {
        return Some(Blocker::VmMigrating {
            vm: name,
            target: migration.target_node.clone(),
            since: migration.started,
            target_ready: migration.target_ready,
        });
    }
    if vm.evacuation_node.as_deref() == Some(node) {
        if let Some(failed) = vm.migration.as_ref().filter(|m| m.failed) {
            let target = failed.target_node.as_deref().unwrap_or("another node");
            return Some(Blocker::VmCannotMigrate {
                vm: name,
                why: format!("its live migration to {target} failed (KubeVirt tries again)"),
            });
        }
        return Some(Blocker::VmMigrating {
            vm: name,
            target: None,
            since: None,
            target_ready: false,
        });
    }
    let must_migrate = vm.eviction_strategy.as_deref() == Some("LiveMigrate");
    match &vm.migratable {
        Some(condition) if must_migrate && condition.status == ConditionStatus::False => {
            let mut why = "LiveMigratable is False".to_string();
            for part in [&condition.reason, &condition.message]
                .into_iter()
                .flatten()
            {
                why.push_str(": ");
                why.push_str(part);
            }
            Some(Blocker::VmCannotMigrate { vm: name, why })
        }
        _ => None,
    }
}

impl Observed {
    /// Takes in the node `name`'s `Ready` condition; true when it changed.
    pub(super) fn node_ready(&mut self, name: &str, ready: &NodeReady) -> bool {
        if self.node == name && self.ready == *ready {
            return false;
        }
        self.node = name.to_string();
        self.ready = ready.clone();
        true
    }

    /// Takes in the VMIs on the node; true when they changed.
    pub(super) fn vms(&mut self, vms: VmList) -> bool {
        let vms: BTreeMap<(String, String), VmInfo> = vms
            .into_iter()
            .map(|vm| ((vm.namespace.clone(), vm.name.clone()), vm))
            .collect();
        if vms == self.vms {
            return false;
        }
        self.vms = vms;
        true
    }

    /// The reasons the observations give (by pod), for the pods `pending` now.
    pub(super) fn reasons(&self) -> &BTreeMap<PodRef, PodReason> {
        &self.reasons
    }

    /// Works the reasons out again for the pods `pending` now.
    pub(super) fn refresh(&mut self, pending: &[PendingPod]) {
        self.reasons.clear();
        self.refresh_vms(pending);
        if !self.ready.is_down() {
            return;
        }
        let stuck: Vec<PodRef> = pending
            .iter()
            .filter(|p| p.source.terminating)
            .map(|p| p.pod.clone())
            .collect();
        if stuck.is_empty() {
            return;
        }
        let blocker = Blocker::NodeNotReady {
            node: self.node.clone(),
            // Only a node that is down blocks: its status is `False` or `Unknown`.
            status: self.ready.status.unwrap_or_default(),
            reason: self.ready.reason.clone(),
            since: self.ready.since,
            pods: stuck.clone(),
        };
        for pod in stuck {
            let reason = PodReason {
                reason: PendingReason::Terminating,
                pdb: None,
                message: String::new(),
                blocker: Some(blocker.clone()),
            };
            self.reasons.insert(pod, reason);
        }
    }
}

impl Observed {
    /// The launcher pods of VMs whose state says something.
    fn refresh_vms(&mut self, pending: &[PendingPod]) {
        if self.vms.is_empty() {
            return;
        }
        for pod in pending.iter().filter(|p| pod_is_virt_launcher(&p.source)) {
            let Some(owner) = pod.controller.as_ref().filter(|c| c.kind == VMI_KIND) else {
                continue;
            };
            let key = (pod.pod.namespace.to_string(), owner.name.clone());
            let Some(blocker) = self.vms.get(&key).and_then(|vm| vm_blocker(vm, &self.node)) else {
                continue;
            };
            let reason = match blocker {
                Blocker::VmCannotMigrate { .. } => PendingReason::VmCannotMigrate,
                _ => PendingReason::LiveMigrating,
            };
            self.reasons.insert(
                pod.pod.clone(),
                PodReason {
                    reason,
                    pdb: None,
                    message: String::new(),
                    blocker: Some(blocker),
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::decisions::PodAction;
    use crate::model::PodInfo;

    fn pending(name: &str, terminating: bool) -> PendingPod {
        let pod = Arc::new(PodInfo {
            terminating,
            ..PodInfo::test("app", name)
        });
        PendingPod::of(&pod, PodAction::Wait)
    }

    #[test]
    fn terminating_pods_on_a_node_that_is_not_ready_are_named_and_nothing_else() {
        let mut observed = Observed::default();
        let pods = [pending("stuck", true), pending("running", false)];
        assert!(observed.node_ready("n1", &NodeReady::ready()));
        observed.refresh(&pods);
        assert!(
            observed.reasons().is_empty(),
            "a Ready node finishes its pods"
        );
        let down = NodeReady {
            status: Some(ConditionStatus::Unknown),
            since: None,
            reason: Some("NodeStatusUnknown".into()),
        };
        assert!(observed.node_ready("n1", &down));
        assert!(!observed.node_ready("n1", &down), "unchanged");
        observed.refresh(&pods);
        let reasons = observed.reasons();
        assert_eq!(reasons.len(), 1);
        let stuck = &reasons[&pods[0].pod];
        let blocker = stuck.blocker.as_ref().expect("a blocker");
        assert_eq!(blocker.reason(), "NodeNotReady");
        let text = blocker.to_string();
        assert!(text.contains("Ready=Unknown, NodeStatusUnknown"), "{text}");
        assert!(text.contains("app/stuck"), "{text}");
        assert!(blocker.needs_a_person());
    }

    fn launcher(vm: &str) -> PendingPod {
        let mut pod = PodInfo::test("vms", &format!("virt-launcher-{vm}-x"))
            .labelled("kubevirt.io", "virt-launcher");
        pod.controller = Some(crate::model::OwnerRef {
            kind: "VirtualMachineInstance".into(),
            name: vm.into(),
            uid: crate::model::Uid::default(),
        });
        PendingPod::of(&Arc::new(pod), PodAction::Evict)
    }

    fn vm(name: &str) -> VmInfo {
        VmInfo {
            namespace: "vms".into(),
            name: name.into(),
            eviction_strategy: Some("LiveMigrate".into()),
            node: Some("n1".into()),
            ..VmInfo::default()
        }
    }

    #[test]
    fn a_launcher_pod_is_told_in_kubevirt_words() {
        let mut observed = Observed::default();
        observed.node_ready("n1", &NodeReady::ready());
        let pods = [launcher("a"), launcher("b"), launcher("c"), launcher("d")];
        let migrating = VmInfo {
            migration: Some(crate::model::VmMigration {
                target_node: Some("n2".into()),
                target_ready: true,
                ..Default::default()
            }),
            ..vm("a")
        };
        let marked = VmInfo {
            evacuation_node: Some("n1".into()),
            ..vm("b")
        };
        let stuck = VmInfo {
            migratable: Some(crate::model::VmCondition {
                status: "False".into(),
                reason: Some("DisksNotLiveMigratable".into()),
                message: Some("PVC rootdisk is not shared".into()),
            }),
            ..vm("c")
        };
        assert!(observed.vms(vec![migrating, marked, stuck, vm("d")]));
        observed.refresh(&pods);
        let said = |i: usize| {
            observed
                .reasons()
                .get(&pods[i].pod)
                .and_then(|r| r.blocker.as_ref())
                .map(ToString::to_string)
        };
        assert_eq!(
            said(0).as_deref(),
            Some(
                "VM vms/a is live-migrating to node n2, its domain is ready on the target; its launcher pod leaves when the migration completes"
            )
        );
        assert!(said(1).is_some_and(|s| s.contains("marked for evacuation")));
        let cannot = said(2).unwrap_or_default();
        assert!(
            cannot.contains("VM vms/c cannot live-migrate: LiveMigratable is False: DisksNotLiveMigratable: PVC rootdisk is not shared"),
            "{cannot}"
        );
        assert_eq!(
            said(3),
            None,
            "nothing to say yet: the eviction actor's answer stands"
        );
        assert_eq!(
            observed.reasons()[&pods[0].pod].reason.as_str(),
            "LiveMigrating"
        );
    }
}
