//! The admission rules as pure functions over what the cluster said: no I/O here, so every
//! decision (and every message, which must match the Go operator's word for word) is unit tested.
//!
//! Each rule returns `Result<_, Denial>` so that the caller chains them with `?` and stops at the
//! first refusal, in the Go operator's order: node exists, no other NodeMaintenance, quorum.

use std::collections::BTreeSet;
use std::fmt;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::crd::NodeMaintenance;

/// The labels that make a node a control-plane node (the second is the pre-1.24 name).
pub const CONTROL_PLANE_LABELS: [&str; 2] = [
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
];

/// Where OpenShift keeps etcd and its quorum guard.
pub const ETCD_NAMESPACE: &str = "openshift-etcd";

/// The etcd quorum guard PDB's names: since OpenShift 4.11, and up to 4.10.
pub const ETCD_GUARD_PDB_NAMES: [&str; 2] = ["etcd-guard-pdb", "etcd-quorum-guard"];

/// The guard pods' selector when the PDB does not say (it always does on OpenShift).
pub const DEFAULT_GUARD_POD_SELECTOR: &str = "app=guard";

/// The Go operator's refusal when disrupting a control-plane node could cost etcd its quorum.
pub fn quorum_violation(node_name: &str) -> String {
    format!(
        "can not put master/control-plane node into maintenance at this moment, disrupting node {node_name} will violate etcd quorum"
    )
}

/// Why a request is refused: the message the user sees (`kubectl` prints it after
/// "admission webhook ... denied the request:").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The whole message, exactly as returned in the AdmissionResponse.
    pub message: String,
}

impl Denial {
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// A lookup that failed: the request is refused (never allowed by accident), and the user is
    /// told that trying again may help.
    pub fn lookup_failed(what: &str, error: impl fmt::Display) -> Self {
        Self::new(format!("could not {what}: {error}, please try again"))
    }
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// UPDATE: `spec.nodeName` never changes (the node actor and the lease are keyed by it).
pub fn node_name_unchanged(old: &NodeMaintenance, new: &NodeMaintenance) -> Result<(), Denial> {
    if old.spec.node_name == new.spec.node_name {
        Ok(())
    } else {
        Err(Denial::new("updating spec.NodeName isn't allowed"))
    }
}

/// CREATE and UPDATE: `spec.drainTimeout`, when set, is a Go duration longer than zero.
pub fn drain_timeout_valid(nm: &NodeMaintenance) -> Result<(), Denial> {
    match nm.spec.drain_timeout.as_deref() {
        None => Ok(()),
        Some(value) => crate::drain_timeout::parse(value)
            .map(drop)
            .map_err(|error| Denial::new(error.to_string())),
    }
}

/// CREATE: the node must exist. `node` is the result of a GET that answered 404 with `None`.
pub fn node_exists<'a>(node_name: &str, node: Option<&'a Node>) -> Result<&'a Node, Denial> {
    node.ok_or_else(|| {
        Denial::new(format!(
            "invalid nodeName, no node with name {node_name} found"
        ))
    })
}

/// CREATE: no other NodeMaintenance may target the node, not even one being deleted (its undo
/// would race the new one's cordon).
pub fn no_other_maintenance(node_name: &str, existing: &[NodeMaintenance]) -> Result<(), Denial> {
    if existing.iter().any(|nm| nm.spec.node_name == node_name) {
        Err(Denial::new(format!(
            "invalid nodeName, a NodeMaintenance for node {node_name} already exists"
        )))
    } else {
        Ok(())
    }
}

/// Whether the node carries a control-plane role label (any value, as kubeadm sets it empty).
pub fn is_control_plane(node: &Node) -> bool {
    has_control_plane_label(&node.metadata)
}

/// Whether a node's metadata carries a control-plane role label.
pub fn has_control_plane_label(metadata: &ObjectMeta) -> bool {
    metadata
        .labels
        .as_ref()
        .is_some_and(|labels| CONTROL_PLANE_LABELS.iter().any(|l| labels.contains_key(*l)))
}

/// What the etcd quorum guard PDBs in `openshift-etcd` say about disrupting one more member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EtcdGuard {
    /// No PDB at all in `openshift-etcd`: not OpenShift, use the one-control-plane-node rule.
    Absent,
    /// The guard allows one more disruption.
    Allows,
    /// The guard allows none: allowed only if this node's etcd is already disrupted, which the
    /// node's guard pods (selected by this label selector) tell.
    CheckGuardPods {
        /// Label selector of the guard pods, in the query-string syntax of `labelSelector=`.
        selector: String,
    },
}

/// Reads the PDBs of `openshift-etcd`. With PDBs present but not exactly one named as the etcd
/// guard, nothing safe can be concluded, so the request is refused (as the Go operator does).
pub fn etcd_guard(
    node_name: &str,
    pdbs_in_etcd_namespace: &[PodDisruptionBudget],
) -> Result<EtcdGuard, Denial> {
    if pdbs_in_etcd_namespace.is_empty() {
        return Ok(EtcdGuard::Absent);
    }
    let guards: Vec<&PodDisruptionBudget> = pdbs_in_etcd_namespace
        .iter()
        .filter(|pdb| {
            pdb.metadata
                .name
                .as_deref()
                .is_some_and(|name| ETCD_GUARD_PDB_NAMES.contains(&name))
        })
        .collect();
    let [guard] = guards.as_slice() else {
        return Err(Denial::new(quorum_violation(node_name)));
    };
    let allowed = guard
        .status
        .as_ref()
        .map_or(0, |status| status.disruptions_allowed);
    if allowed >= 1 {
        return Ok(EtcdGuard::Allows);
    }
    let selector = guard
        .spec
        .as_ref()
        .and_then(|spec| spec.selector.as_ref())
        .and_then(selector_query)
        .unwrap_or_else(|| DEFAULT_GUARD_POD_SELECTOR.to_string());
    Ok(EtcdGuard::CheckGuardPods { selector })
}

/// With no disruption left in the guard's budget: allowed only when none of this node's guard
/// pods is Ready, i.e. etcd on this node already counts as disrupted, so maintenance costs
/// nothing more. A node with no guard pod at all has no etcd member to lose.
pub fn guard_pods_allow(node_name: &str, guard_pods: &[Pod]) -> Result<(), Denial> {
    let ready_here = guard_pods
        .iter()
        .filter(|pod| pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node_name))
        .any(is_ready);
    if ready_here {
        Err(Denial::new(quorum_violation(node_name)))
    } else {
        Ok(())
    }
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

/// Without an etcd guard (not OpenShift): at most one control-plane node in maintenance at a
/// time, because a second one down can cost a three-member etcd its quorum. Every existing
/// NodeMaintenance counts, whatever its phase or deletion state, since its node may still be
/// cordoned and drained.
pub fn no_other_control_plane_in_maintenance(
    node_name: &str,
    existing: &[NodeMaintenance],
    control_plane_nodes: &BTreeSet<String>,
) -> Result<(), Denial> {
    let other = existing.iter().find(|nm| {
        nm.spec.node_name != node_name && control_plane_nodes.contains(&nm.spec.node_name)
    });
    match other {
        Some(nm) => Err(Denial::new(format!(
            "can not put master/control-plane node into maintenance at this moment, control-plane node {} is already in maintenance (NodeMaintenance {}), and disrupting node {node_name} too may violate etcd quorum",
            nm.spec.node_name,
            nm.metadata.name.as_deref().unwrap_or("<unnamed>")
        ))),
        None => Ok(()),
    }
}

/// A `LabelSelector` in the `labelSelector=` query syntax; `None` when it selects nothing
/// expressible (empty, or an operator this code does not know, in which case the caller falls
/// back to the guard pods' well-known label).
pub fn selector_query(selector: &LabelSelector) -> Option<String> {
    let mut terms = Vec::new();
    for (key, value) in selector.match_labels.iter().flatten() {
        terms.push(format!("{key}={value}"));
    }
    for expression in selector.match_expressions.iter().flatten() {
        let values = expression.values.as_deref().unwrap_or_default().join(",");
        let term = match expression.operator.as_str() {
            "In" => format!("{} in ({values})", expression.key),
            "NotIn" => format!("{} notin ({values})", expression.key),
            "Exists" => expression.key.clone(),
            "DoesNotExist" => format!("!{}", expression.key),
            _ => return None,
        };
        terms.push(term);
    }
    if terms.is_empty() {
        None
    } else {
        Some(terms.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::NodeMaintenanceSpec;
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};
    use k8s_openapi::api::policy::v1::{PodDisruptionBudgetSpec, PodDisruptionBudgetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelectorRequirement, ObjectMeta};

    fn nm(name: &str, node: &str) -> NodeMaintenance {
        NodeMaintenance::new(
            name,
            NodeMaintenanceSpec {
                node_name: node.to_string(),
                reason: None,
                drain_timeout: None,
                on_drain_timeout: None,
            },
        )
    }

    fn node(name: &str, labels: &[&str]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                labels: Some(
                    labels
                        .iter()
                        .map(|l| (l.to_string(), String::new()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn pdb(name: &str, allowed: i32, match_labels: Option<&[(&str, &str)]>) -> PodDisruptionBudget {
        PodDisruptionBudget {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(ETCD_NAMESPACE.to_string()),
                ..Default::default()
            },
            spec: Some(PodDisruptionBudgetSpec {
                selector: match_labels.map(|labels| LabelSelector {
                    match_labels: Some(
                        labels
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect(),
                    ),
                    match_expressions: None,
                }),
                ..Default::default()
            }),
            status: Some(PodDisruptionBudgetStatus {
                disruptions_allowed: allowed,
                ..Default::default()
            }),
        }
    }

    fn guard_pod(node: &str, ready: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(format!("etcd-guard-{node}")),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some(node.to_string()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                conditions: ready.map(|status| {
                    vec![PodCondition {
                        type_: "Ready".to_string(),
                        status: status.to_string(),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn update_keeps_the_node_name() {
        assert_eq!(node_name_unchanged(&nm("a", "n1"), &nm("a", "n1")), Ok(()));
        let denial = node_name_unchanged(&nm("a", "n1"), &nm("a", "n2")).unwrap_err();
        assert_eq!(denial.message, "updating spec.NodeName isn't allowed");
    }

    #[test]
    fn a_missing_node_is_named() {
        let denial = node_exists("ghost", None).unwrap_err();
        assert_eq!(
            denial.message,
            "invalid nodeName, no node with name ghost found"
        );
        let present = node("n1", &[]);
        assert!(node_exists("n1", Some(&present)).is_ok());
    }

    #[test]
    fn a_second_maintenance_for_a_node_is_refused() {
        let existing = [nm("other", "n2"), nm("first", "n1")];
        let denial = no_other_maintenance("n1", &existing).unwrap_err();
        assert_eq!(
            denial.message,
            "invalid nodeName, a NodeMaintenance for node n1 already exists"
        );
        assert_eq!(no_other_maintenance("n3", &existing), Ok(()));
    }

    #[test]
    fn both_role_labels_mean_control_plane() {
        assert!(is_control_plane(&node("a", &[CONTROL_PLANE_LABELS[0]])));
        assert!(is_control_plane(&node("b", &[CONTROL_PLANE_LABELS[1]])));
        assert!(!is_control_plane(&node(
            "c",
            &["node-role.kubernetes.io/worker"]
        )));
        assert!(!is_control_plane(&Node::default()));
    }

    #[test]
    fn no_pdb_in_openshift_etcd_means_not_openshift() {
        assert_eq!(etcd_guard("cp1", &[]), Ok(EtcdGuard::Absent));
    }

    #[test]
    fn a_guard_with_a_disruption_left_allows() {
        let pdbs = [pdb("etcd-guard-pdb", 1, Some(&[("app", "guard")]))];
        assert_eq!(etcd_guard("cp1", &pdbs), Ok(EtcdGuard::Allows));
        let old_name = [pdb("etcd-quorum-guard", 2, None)];
        assert_eq!(etcd_guard("cp1", &old_name), Ok(EtcdGuard::Allows));
    }

    #[test]
    fn zero_or_several_guards_refuse() {
        let unrelated = [pdb("something-else", 5, None)];
        assert_eq!(
            etcd_guard("cp1", &unrelated).unwrap_err().message,
            quorum_violation("cp1")
        );
        let two = [
            pdb("etcd-guard-pdb", 1, None),
            pdb("etcd-quorum-guard", 1, None),
        ];
        assert_eq!(
            etcd_guard("cp1", &two).unwrap_err().message,
            "can not put master/control-plane node into maintenance at this moment, disrupting node cp1 will violate etcd quorum"
        );
    }

    #[test]
    fn an_exhausted_guard_defers_to_the_guard_pods_by_its_selector() {
        let pdbs = [pdb("etcd-guard-pdb", 0, Some(&[("app", "guard")]))];
        assert_eq!(
            etcd_guard("cp1", &pdbs),
            Ok(EtcdGuard::CheckGuardPods {
                selector: "app=guard".to_string()
            })
        );
        let no_selector = [pdb("etcd-guard-pdb", 0, None)];
        assert_eq!(
            etcd_guard("cp1", &no_selector),
            Ok(EtcdGuard::CheckGuardPods {
                selector: DEFAULT_GUARD_POD_SELECTOR.to_string()
            })
        );
    }

    #[test]
    fn a_ready_guard_pod_on_the_node_refuses() {
        let pods = [
            guard_pod("cp1", Some("True")),
            guard_pod("cp2", Some("False")),
        ];
        assert_eq!(
            guard_pods_allow("cp1", &pods).unwrap_err().message,
            quorum_violation("cp1")
        );
        // cp2's etcd is already disrupted: maintaining it costs nothing more.
        assert_eq!(guard_pods_allow("cp2", &pods), Ok(()));
        // No guard pod: no etcd member on that node.
        assert_eq!(guard_pods_allow("cp3", &pods), Ok(()));
        // Not reporting readiness yet is not Ready.
        assert_eq!(guard_pods_allow("cp4", &[guard_pod("cp4", None)]), Ok(()));
    }

    #[test]
    fn one_control_plane_node_at_a_time_without_a_guard() {
        let control_plane: BTreeSet<String> =
            ["cp1", "cp2"].iter().map(|s| s.to_string()).collect();
        let existing = [nm("worker-job", "w1"), nm("cp1-kernel", "cp1")];
        let denial =
            no_other_control_plane_in_maintenance("cp2", &existing, &control_plane).unwrap_err();
        assert!(denial.message.contains("cp1-kernel"), "{denial}");
        assert!(
            denial.message.contains("control-plane node cp1"),
            "{denial}"
        );
        assert!(denial.message.contains("node cp2"), "{denial}");
        let only_workers = [nm("worker-job", "w1")];
        assert_eq!(
            no_other_control_plane_in_maintenance("cp2", &only_workers, &control_plane),
            Ok(())
        );
    }

    #[test]
    fn selectors_render_in_query_syntax() {
        let selector = LabelSelector {
            match_labels: Some([("app".to_string(), "guard".to_string())].into()),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "tier".to_string(),
                    operator: "In".to_string(),
                    values: Some(vec!["a".to_string(), "b".to_string()]),
                },
                LabelSelectorRequirement {
                    key: "gone".to_string(),
                    operator: "DoesNotExist".to_string(),
                    values: None,
                },
            ]),
        };
        assert_eq!(
            selector_query(&selector).as_deref(),
            Some("app=guard,tier in (a,b),!gone")
        );
        assert_eq!(selector_query(&LabelSelector::default()), None);
        let unknown = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "x".to_string(),
                operator: "Sometimes".to_string(),
                values: None,
            }]),
            ..Default::default()
        };
        assert_eq!(selector_query(&unknown), None);
    }

    #[test]
    fn lookup_failures_ask_to_try_again() {
        let denial = Denial::lookup_failed("get node n1", "connection refused");
        assert!(denial.message.ends_with("please try again"), "{denial}");
        assert!(denial.message.contains("connection refused"), "{denial}");
    }
}
