//! What maintenance left on a node, read from the simulator's store (no API request, so the
//! demo's own looking does not count against nmo).

use nmo_actors::config::defaults::LEASE_NAMESPACE;
use nmo_actors::decisions::lease_name;
use nmo_actors::model::{DRAIN_TAINT_KEY, EXCLUDE_LABEL, UNSCHEDULABLE_TAINT_KEY};
use serde::Serialize;
use serde_json::Value;

use nmo_sim::SimHandle;

/// The taints nmo puts on a node in maintenance.
const NMO_TAINTS: [&str; 2] = [DRAIN_TAINT_KEY, UNSCHEDULABLE_TAINT_KEY];

/// The maintenance marks on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeMarks {
    /// The node.
    pub node: String,
    /// `spec.unschedulable`.
    pub cordoned: bool,
    /// nmo's taints present.
    pub tainted: bool,
    /// The exclude-from-remediation label present.
    pub labelled: bool,
    /// nmo's lease for the node present.
    pub leased: bool,
}

impl NodeMarks {
    /// Reads the marks of `node`; None when the node does not exist.
    pub fn read(sim: &SimHandle, node: &str) -> Option<NodeMarks> {
        let object = sim.get_json("", "nodes", "", node)?;
        Some(NodeMarks {
            node: node.to_string(),
            cordoned: object["spec"]["unschedulable"].as_bool() == Some(true),
            tainted: has_nmo_taint(&object),
            labelled: object["metadata"]["labels"][EXCLUDE_LABEL].is_string(),
            leased: sim
                .get_json(
                    "coordination.k8s.io",
                    "leases",
                    LEASE_NAMESPACE,
                    &lease_name(node),
                )
                .is_some(),
        })
    }

    /// Nothing of the maintenance is left.
    pub fn restored(&self) -> bool {
        !(self.cordoned || self.tainted || self.labelled || self.leased)
    }
}

fn has_nmo_taint(node: &Value) -> bool {
    node["spec"]["taints"].as_array().is_some_and(|taints| {
        taints
            .iter()
            .any(|t| NMO_TAINTS.iter().any(|key| t["key"] == *key))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_nmo_taints_count() {
        assert!(!has_nmo_taint(
            &json!({"spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}]}})
        ));
        assert!(has_nmo_taint(
            &json!({"spec": {"taints": [{"key": "medik8s.io/drain", "effect": "NoSchedule"}]}})
        ));
        assert!(!has_nmo_taint(&json!({"spec": {}})));
    }
}
