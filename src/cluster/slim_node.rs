//! A Node as nmo reads it: name, labels, annotations, `spec.unschedulable`, `spec.taints` and
//! the `Ready` condition, never the whole object.
//!
//! A real Node is 10-15 KiB of JSON (images, nodeInfo, conditions, addresses): a cache of
//! every Node would be 50-100 MB at 5,000 nodes. Here each Node is decoded into [`SlimNode`],
//! which only has the fields nmo reads (serde skips the rest without allocating it), the list
//! comes in small pages, and each object is reduced at once to what its reader keeps: a
//! [`NodeSummary`] of a few bytes for the budget, a [`NodeState`] for a node in maintenance.

use k8s_openapi::api::core::v1::{Node, Taint as KubeTaint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Resource, ResourceExt};
use nmo_actors::model::{NodeState, NodeSummary};
use serde::Deserialize;

use super::convert;

/// Nodes per LIST page: the page's JSON is held while it is decoded (100 x ~12 KiB).
pub const PAGE_SIZE: u32 = 100;

/// A Node with only what nmo reads.
#[derive(Resource, Deserialize, Clone, Debug)]
#[resource(inherit = Node)]
pub struct SlimNode {
    /// Name (the rest of the metadata is decoded by `ObjectMeta`, which kube requires).
    pub metadata: ObjectMeta,
    /// `spec.unschedulable`.
    #[serde(default)]
    pub spec: Option<SlimSpec>,
    /// `status.conditions`.
    #[serde(default)]
    pub status: Option<SlimStatus>,
}

/// `spec` of a [`SlimNode`].
#[derive(Deserialize, Clone, Debug, Default)]
pub struct SlimSpec {
    /// Cordoned.
    #[serde(default)]
    pub unschedulable: Option<bool>,
    /// `spec.taints`.
    #[serde(default)]
    pub taints: Option<Vec<KubeTaint>>,
}

/// `status` of a [`SlimNode`].
#[derive(Deserialize, Clone, Debug, Default)]
pub struct SlimStatus {
    /// The node's conditions (type, status, since when and why).
    #[serde(default)]
    pub conditions: Option<Vec<SlimNodeCondition>>,
}

/// A node condition with what nmo reads of it (never the heartbeat, which changes every few
/// seconds and would make every node watch event a change).
#[derive(Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct SlimNodeCondition {
    /// E.g. `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// When it took this status.
    #[serde(default)]
    pub last_transition_time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// Why.
    #[serde(default)]
    pub reason: Option<String>,
}

/// The budget's view of one node.
pub fn summary(node: &SlimNode) -> NodeSummary {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        });
    NodeSummary {
        name: node.name_any().into(),
        ready,
        unschedulable: node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false),
    }
}

/// The node actor's view of one node.
pub fn node_state(node: &SlimNode) -> NodeState {
    let spec = node.spec.as_ref();
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| {
            convert::node_ready(
                &c.status,
                c.last_transition_time.as_ref(),
                c.reason.as_deref(),
            )
        })
        .unwrap_or_default();
    NodeState {
        ready,
        ..convert::node_state_of(
            &node.metadata,
            spec.and_then(|s| s.unschedulable),
            spec.and_then(|s| s.taints.as_deref()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_read_as_ready_and_cordoned_only() {
        let node: SlimNode = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1", "labels": {"a": "b"}},
            "spec": {"unschedulable": true, "podCIDR": "10.0.0.0/24"},
            "status": {
                "conditions": [
                    {"type": "MemoryPressure", "status": "False"},
                    {"type": "Ready", "status": "True", "reason": "KubeletReady",
                     "lastTransitionTime": "2026-11-30T10:00:00Z"}
                ],
                "images": [{"names": ["x"], "sizeBytes": 1}]
            }
        }))
        .unwrap();
        let ready = node_state(&node).ready;
        assert_eq!(ready.status, Some(nmo_actors::model::ConditionStatus::True));
        assert_eq!(ready.reason.as_deref(), Some("KubeletReady"));
        assert_eq!(
            ready.since.map(|t| t.to_rfc3339()),
            Some("2026-11-30T10:00:00+00:00".to_string())
        );
        assert_eq!(
            summary(&node),
            NodeSummary {
                name: "n1".into(),
                ready: true,
                unschedulable: true
            }
        );
        let bare: SlimNode =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "n2"}})).unwrap();
        assert_eq!(
            summary(&bare),
            NodeSummary {
                name: "n2".into(),
                ready: false,
                unschedulable: false
            }
        );
    }
}
