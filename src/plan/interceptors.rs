//! What the plan says about the workloads that act on eviction requests: which admission
//! webhooks on `pods/eviction` will see a pod's eviction (the webhooks' names, or KubeVirt for
//! a launcher pod), and for a KubeVirt VM whether its eviction makes it live-migrate or shuts
//! it down, from its eviction strategy and KubeVirt's `LiveMigratable` condition (the tables
//! of kubevirt/kubevirt's docs/handling-eviction-requests.md). Pure.

use std::collections::BTreeMap;

use nmo_actors::interception::{EvictionWebhooks, Interception, VMI_KIND, pod_is_virt_launcher};
use nmo_actors::model::{ConditionStatus, PodInfo, VmInfo};
use serde::Serialize;

/// What a VM's eviction does to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VmPlan {
    /// The VMI, `namespace/name`.
    pub name: String,
    /// Its `spec.evictionStrategy` (None: KubeVirt's cluster-wide default applies).
    pub eviction_strategy: Option<String>,
    /// Its `LiveMigratable` condition (`True`, or `False: <reason>`), when KubeVirt reports one.
    pub migratable: Option<String>,
    /// What the eviction does: live-migrate, shut down, or nothing until a person acts.
    pub outcome: String,
    /// It cannot go: KubeVirt refuses its eviction for as long as it cannot migrate.
    #[serde(skip)]
    pub blocked: bool,
}

/// The VMIs read, by `(namespace, name)`.
pub type Vms = BTreeMap<(String, String), VmInfo>;

/// Who will see the eviction of `pod` besides its budget.
pub fn interceptors(webhooks: &EvictionWebhooks, pod: &PodInfo) -> Vec<String> {
    match webhooks.for_pod(&pod.labels, pod.controller.as_ref()) {
        Interception::None => Vec::new(),
        Interception::Intercepted { webhooks, launcher } => {
            let mut who = webhooks;
            if launcher && who.is_empty() {
                who.push("KubeVirt".to_string());
            }
            who
        }
    }
}

fn migratable(vm: &VmInfo) -> Option<String> {
    vm.migratable.as_ref().map(|c| match &c.reason {
        Some(reason) if c.status != ConditionStatus::True => format!("{}: {reason}", c.status),
        _ => c.status.to_string(),
    })
}

/// What evicting the launcher pod `pod` does to its VM, if it is one.
pub fn vm_plan(pod: &PodInfo, vms: &Vms) -> Option<VmPlan> {
    if !pod_is_virt_launcher(pod) {
        return None;
    }
    let owner = pod.controller.as_ref().filter(|c| c.kind == VMI_KIND)?;
    let name = format!("{}/{}", pod.namespace, owner.name);
    let Some(vm) = vms.get(&(pod.namespace.to_string(), owner.name.clone())) else {
        return Some(VmPlan {
            name,
            eviction_strategy: None,
            migratable: None,
            outcome: "unknown: its VirtualMachineInstance could not be read".to_string(),
            blocked: false,
        });
    };
    let can_migrate = vm
        .migratable
        .as_ref()
        .map(|c| c.status == ConditionStatus::True);
    let (outcome, blocked) = match (vm.eviction_strategy.as_deref(), can_migrate) {
        (Some("LiveMigrate"), Some(false)) => (
            "cannot migrate: KubeVirt refuses its eviction until it can (LiveMigrate, not migratable)",
            true,
        ),
        (Some("LiveMigrate"), Some(true)) | (Some("LiveMigrateIfPossible"), Some(true)) => {
            ("live-migrates to another node", false)
        }
        (Some("LiveMigrate"), None) => ("live-migrates if KubeVirt finds it migratable", false),
        (Some("LiveMigrateIfPossible"), _) => ("shut down: it is not live-migratable", false),
        (Some("External"), _) => (
            "handed to its external controller (evacuation marked, e.g. cluster-api-provider-kubevirt)",
            false,
        ),
        (Some("None"), _) => ("shut down (evictionStrategy None)", false),
        _ => ("as KubeVirt's cluster-wide eviction strategy says", false),
    };
    Some(VmPlan {
        name,
        eviction_strategy: vm.eviction_strategy.clone(),
        migratable: migratable(vm),
        outcome: outcome.to_string(),
        blocked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmo_actors::model::{OwnerRef, VmCondition};

    fn launcher(vm: &str) -> PodInfo {
        let mut pod = PodInfo::test("vms", &format!("virt-launcher-{vm}-x"))
            .labelled("kubevirt.io", "virt-launcher");
        pod.controller = Some(OwnerRef {
            kind: "VirtualMachineInstance".into(),
            name: vm.into(),
            uid: nmo_actors::model::Uid::default(),
        });
        pod
    }

    fn vm(name: &str, strategy: Option<&str>, migratable: Option<bool>) -> VmInfo {
        VmInfo {
            namespace: "vms".into(),
            name: name.into(),
            eviction_strategy: strategy.map(str::to_string),
            migratable: migratable.map(|m| VmCondition {
                status: ConditionStatus::of(m),
                reason: (!m).then(|| "DisksNotLiveMigratable".to_string()),
                message: None,
            }),
            ..VmInfo::default()
        }
    }

    #[test]
    fn a_vm_live_migrates_shuts_down_or_cannot_go_as_kubevirt_documents() {
        let vms: Vms = [
            vm("a", Some("LiveMigrate"), Some(true)),
            vm("b", Some("LiveMigrate"), Some(false)),
            vm("c", Some("LiveMigrateIfPossible"), Some(false)),
            vm("d", Some("None"), None),
        ]
        .into_iter()
        .map(|v| ((v.namespace.clone(), v.name.clone()), v))
        .collect();
        let outcome = |name: &str| vm_plan(&launcher(name), &vms).expect("a VM");
        assert_eq!(outcome("a").outcome, "live-migrates to another node");
        let b = outcome("b");
        assert!(b.blocked && b.outcome.starts_with("cannot migrate"));
        assert_eq!(
            b.migratable.as_deref(),
            Some("False: DisksNotLiveMigratable")
        );
        assert!(outcome("c").outcome.starts_with("shut down"));
        assert!(outcome("d").outcome.starts_with("shut down"));
        assert!(outcome("e").outcome.starts_with("unknown"));
        assert!(vm_plan(&PodInfo::test("app", "web"), &vms).is_none());
    }

    #[test]
    fn the_webhooks_or_kubevirt_see_the_eviction() {
        let none = EvictionWebhooks::default();
        assert!(interceptors(&none, &PodInfo::test("app", "web")).is_empty());
        assert_eq!(interceptors(&none, &launcher("a")), ["KubeVirt"]);
        let kubevirt = EvictionWebhooks {
            names: ["virt-launcher-eviction-interceptor.kubevirt.io".to_string()].into(),
        };
        assert!(
            interceptors(&kubevirt, &PodInfo::test("app", "web")).is_empty(),
            "KubeVirt's webhook approves every other pod's eviction"
        );
        assert_eq!(
            interceptors(&kubevirt, &launcher("a")),
            ["virt-launcher-eviction-interceptor.kubevirt.io"]
        );
        let cleaner = EvictionWebhooks {
            names: ["strimzi-drain-cleaner.strimzi.io".to_string()].into(),
        };
        assert_eq!(
            interceptors(&cleaner, &PodInfo::test("kafka", "broker-0")),
            ["strimzi-drain-cleaner.strimzi.io"]
        );
    }
}
