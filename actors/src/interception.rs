//! Who may act on an eviction request besides the PodDisruptionBudget (pure).
//!
//! An eviction request is also a signal. Admission webhooks on `pods/eviction` see every
//! request before the API server asks the budget: KubeVirt's virt-api marks a VirtualMachine
//! for live migration and lets the budget it keeps over the launcher pod answer 429; Strimzi's
//! Drain Cleaner annotates a Kafka broker for a rolling restart and refuses. Such a pod only
//! ever leaves if it is asked, whatever its budget says, and asked again until it is gone
//! (kubectl drain re-asks every 5 s). Where nothing intercepts, asking a pod whose budget
//! allows nothing only earns a 429, and the budget-driven pacing stays.

use std::collections::BTreeSet;

use crate::model::{Labels, OwnerRef, PodInfo};

/// The label KubeVirt puts on every launcher pod (`kubevirt.io=virt-launcher`).
pub const VIRT_LAUNCHER_LABEL: (&str, &str) = ("kubevirt.io", "virt-launcher");
/// The kind of a launcher pod's controlling owner.
pub const VMI_KIND: &str = "VirtualMachineInstance";
/// KubeVirt's eviction webhook (in virt-api's `virt-api-validator` configuration).
pub const KUBEVIRT_WEBHOOK: &str = "virt-launcher-eviction-interceptor.kubevirt.io";
/// The `kubevirt.io` label value of KubeVirt's hotplug volume pods, whose eviction its webhook
/// also acts on.
const HOTPLUG_LABEL_VALUE: &str = "hotplug-disk";

/// Whether KubeVirt's webhook acts on the eviction of a pod with `labels` and `controller`:
/// only launcher pods and hotplug volume pods; "in case the pod is not a virt-launcher or a
/// hp-volume pod - the eviction request is approved" (docs/handling-eviction-requests.md), and
/// its budget alone decides.
fn kubevirt_acts_on(labels: &Labels, controller: Option<&OwnerRef>) -> bool {
    is_virt_launcher(labels, controller)
        || labels
            .get(VIRT_LAUNCHER_LABEL.0)
            .is_some_and(|v| v == HOTPLUG_LABEL_VALUE)
}

/// Whether a pod is a KubeVirt launcher pod (the pod a VirtualMachineInstance runs in): its
/// controller is a VirtualMachineInstance, or it carries KubeVirt's launcher label.
pub fn is_virt_launcher(labels: &Labels, controller: Option<&OwnerRef>) -> bool {
    controller.is_some_and(|c| c.kind == VMI_KIND)
        || labels
            .get(VIRT_LAUNCHER_LABEL.0)
            .is_some_and(|v| v == VIRT_LAUNCHER_LABEL.1)
}

/// [`is_virt_launcher`] of a pod as listed.
pub fn pod_is_virt_launcher(pod: &PodInfo) -> bool {
    is_virt_launcher(&pod.labels, pod.controller.as_ref())
}

/// The admission webhooks of the cluster whose rules match `pods/eviction`, as the watch of
/// the Validating and Mutating WebhookConfigurations reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EvictionWebhooks {
    /// The webhooks' names (`webhooks[].name`, the name an API server's refusal quotes).
    pub names: BTreeSet<String>,
}

/// Who may act on an eviction request for a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interception {
    /// Nothing but its budget: the budget's status decides when to ask.
    None,
    /// These admission webhooks see the request; KubeVirt acts on it if `launcher` (a
    /// launcher pod on a cluster whose webhook list is not known, or empty, still counts).
    Intercepted {
        /// The webhooks' names.
        webhooks: Vec<String>,
        /// A KubeVirt launcher pod.
        launcher: bool,
    },
}

impl Interception {
    /// Whether anything may act on the request.
    pub fn is_intercepted(&self) -> bool {
        matches!(self, Interception::Intercepted { .. })
    }

    /// Who sees the request, in words: the webhooks' names, or "KubeVirt" for a launcher pod
    /// no listed webhook covers.
    pub fn who(&self) -> String {
        match self {
            Interception::None => String::new(),
            Interception::Intercepted { webhooks, .. } if !webhooks.is_empty() => {
                webhooks.join(", ")
            }
            Interception::Intercepted { .. } => "KubeVirt".to_string(),
        }
    }
}

impl EvictionWebhooks {
    /// Who may act on an eviction request for the pod with `labels` and `controller`. A
    /// webhook counts for every pod (its namespace and object selectors are not read: asking a
    /// pod a webhook ignores costs refused requests, never a wrong eviction, the API server
    /// still decides), but KubeVirt's, whose documented behaviour is to act on its own pods
    /// only.
    pub fn for_pod(&self, labels: &Labels, controller: Option<&OwnerRef>) -> Interception {
        let launcher = is_virt_launcher(labels, controller);
        let kubevirt_pod = kubevirt_acts_on(labels, controller);
        let webhooks: Vec<String> = self
            .names
            .iter()
            .filter(|name| kubevirt_pod || name.as_str() != KUBEVIRT_WEBHOOK)
            .cloned()
            .collect();
        if webhooks.is_empty() && !launcher {
            return Interception::None;
        }
        Interception::Intercepted { webhooks, launcher }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        Arc::new(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        )
    }

    #[test]
    fn a_launcher_pod_is_known_by_its_owner_or_its_label() {
        let vmi = OwnerRef {
            kind: "VirtualMachineInstance".into(),
            name: "vm-a".into(),
            uid: crate::model::Uid::default(),
        };
        assert!(is_virt_launcher(&labels(&[]), Some(&vmi)));
        assert!(is_virt_launcher(
            &labels(&[("kubevirt.io", "virt-launcher")]),
            None
        ));
        assert!(!is_virt_launcher(
            &labels(&[("kubevirt.io", "virt-handler")]),
            None
        ));
        let rs = OwnerRef {
            kind: "ReplicaSet".into(),
            name: "web".into(),
            uid: crate::model::Uid::default(),
        };
        assert!(!is_virt_launcher(&labels(&[]), Some(&rs)));
    }

    #[test]
    fn without_webhooks_only_launcher_pods_are_intercepted() {
        let none = EvictionWebhooks::default();
        assert_eq!(none.for_pod(&labels(&[]), None), Interception::None);
        let launcher = none.for_pod(&labels(&[("kubevirt.io", "virt-launcher")]), None);
        assert!(launcher.is_intercepted());
        assert_eq!(launcher.who(), "KubeVirt");
        let hooks = EvictionWebhooks {
            names: ["strimzi-drain-cleaner.strimzi.io".to_string()].into(),
        };
        let any = hooks.for_pod(&labels(&[]), None);
        assert_eq!(any.who(), "strimzi-drain-cleaner.strimzi.io");
    }

    #[test]
    fn kubevirts_webhook_intercepts_only_kubevirts_pods() {
        let kubevirt = EvictionWebhooks {
            names: [KUBEVIRT_WEBHOOK.to_string()].into(),
        };
        assert_eq!(kubevirt.for_pod(&labels(&[]), None), Interception::None);
        let launcher = kubevirt.for_pod(&labels(&[("kubevirt.io", "virt-launcher")]), None);
        assert_eq!(launcher.who(), KUBEVIRT_WEBHOOK);
        let hotplug = kubevirt.for_pod(&labels(&[("kubevirt.io", "hotplug-disk")]), None);
        assert!(hotplug.is_intercepted());
        let both = EvictionWebhooks {
            names: [KUBEVIRT_WEBHOOK.to_string(), "x.example.com".to_string()].into(),
        };
        assert_eq!(both.for_pod(&labels(&[]), None).who(), "x.example.com");
    }
}
