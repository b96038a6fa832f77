//! The cluster at the end of the soak (or of a wave), as the checks read it from the simulator.

use nmo_sim::SimHandle;
use serde_json::Value;

use super::config::{SoakConfig, nm_name};

const EXCLUDE_LABEL: &str = "remediation.medik8s.io/exclude-from-remediation";
const RECORD_ANNOTATION: &str = "nodemaintenance.medik8s.io/before-maintenance";

/// The cluster as the checks see it.
pub struct EndState {
    /// NodeMaintenance name -> (node, phase, lastError).
    maintenances: std::collections::BTreeMap<String, (String, String, String)>,
    /// Nodes of the last wave (their NodeMaintenances stay).
    kept: Vec<String>,
    /// Nodes of the earlier waves (their NodeMaintenances were deleted).
    given_back: Vec<String>,
    /// Nodes carrying any of nmo's marks (label, taints, a cordon no person made, record) or
    /// nmo's lease.
    marked: std::collections::BTreeSet<String>,
    /// Nodes a person cordoned before their maintenance that are cordoned no more.
    lost_cordon: std::collections::BTreeSet<String>,
}

impl EndState {
    /// The cluster now; `admin_cordoned` are the nodes a person cordoned before their
    /// maintenance (their cordon is theirs, not a mark of nmo's).
    pub(super) fn read(
        sim: &SimHandle,
        config: &SoakConfig,
        admin_cordoned: &std::collections::BTreeSet<String>,
    ) -> EndState {
        let maintenances = sim
            .list_json("nodemaintenance.medik8s.io", "nodemaintenances", "")
            .into_iter()
            .filter_map(|nm| {
                let name = nm.pointer("/metadata/name")?.as_str()?.to_string();
                let node = nm.pointer("/spec/nodeName")?.as_str()?.to_string();
                let status = |field: &str| {
                    nm.pointer(&format!("/status/{field}"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                Some((name, (node, status("phase"), status("lastError"))))
            })
            .collect();
        let waves = config.waves();
        let kept = waves.last().cloned().unwrap_or_default();
        let given_back: Vec<String> = waves
            .iter()
            .flatten()
            .filter(|n| !kept.contains(n))
            .cloned()
            .collect();
        let nodes = sim.list_json("", "nodes", "");
        let name_of = |n: &Value| {
            n.pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let mut marked: std::collections::BTreeSet<String> = nodes
            .iter()
            .filter(|n| {
                name_of(n).is_some_and(|name| node_marked(n, admin_cordoned.contains(&name)))
            })
            .filter_map(name_of)
            .collect();
        let lost_cordon = nodes
            .iter()
            .filter(|n| n.pointer("/spec/unschedulable").and_then(Value::as_bool) != Some(true))
            .filter_map(name_of)
            .filter(|name| admin_cordoned.contains(name))
            .collect();
        marked.extend(
            sim.list_json("coordination.k8s.io", "leases", "medik8s-leases")
                .into_iter()
                .filter(|l| {
                    l.pointer("/spec/holderIdentity").and_then(Value::as_str)
                        == Some("node-maintenance")
                })
                .filter_map(|l| {
                    l.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .and_then(|n| n.strip_prefix("node-"))
                        .map(str::to_string)
                }),
        );
        EndState {
            maintenances,
            kept,
            given_back,
            marked,
            lost_cordon,
        }
    }

    /// Nodes given back (their maintenance deleted) that are not as they were before it: a
    /// mark of nmo's left, or a person's cordon lost.
    pub fn different_from_before(&self) -> Vec<String> {
        self.given_back
            .iter()
            .filter(|n| !self.exists(&nm_name(n)))
            .filter(|n| self.marked.contains(*n) || self.lost_cordon.contains(*n))
            .cloned()
            .collect()
    }

    pub(super) fn exists(&self, name: &str) -> bool {
        self.maintenances.contains_key(name)
    }

    /// Nodes of the earlier waves that are free now: no NodeMaintenance, nothing of nmo's.
    pub(super) fn free_nodes(&self) -> Vec<String> {
        self.given_back
            .iter()
            .filter(|n| !self.exists(&nm_name(n)) && !self.marked.contains(*n))
            .cloned()
            .collect()
    }

    pub(super) fn succeeded(&self, name: &str) -> bool {
        self.maintenances
            .get(name)
            .is_some_and(|(_, phase, _)| phase == "Succeeded")
    }

    /// The maintenances that did not converge, described.
    pub fn unconverged(&self) -> Vec<String> {
        let describe = |node: &String, expected: &str| {
            let name = nm_name(node);
            let state = match self.maintenances.get(&name) {
                Some((_, phase, error)) => format!("{phase:?}, lastError {error:?}"),
                None => "gone".to_string(),
            };
            let marked = if self.marked.contains(node) {
                "marked"
            } else {
                "not marked"
            };
            format!("{name} (expected {expected}): {state}, node {marked}")
        };
        let kept = self
            .kept
            .iter()
            .filter(|n| !(self.succeeded(&nm_name(n)) && self.marked.contains(*n)))
            .map(|n| describe(n, "Succeeded"));
        let given_back = self
            .given_back
            .iter()
            .filter(|n| self.exists(&nm_name(n)) || self.marked.contains(*n))
            .map(|n| describe(n, "given back"));
        kept.chain(given_back).collect()
    }

    /// Maintenances converged: kept ones Succeeded with their node marked, deleted ones gone
    /// with their node given back; of how many.
    pub fn converged_count(&self) -> (usize, usize) {
        let kept = self
            .kept
            .iter()
            .filter(|n| self.succeeded(&nm_name(n)) && self.marked.contains(*n))
            .count();
        let given_back = self
            .given_back
            .iter()
            .filter(|n| !self.exists(&nm_name(n)) && !self.marked.contains(*n))
            .count();
        (kept + given_back, self.kept.len() + self.given_back.len())
    }

    /// Nodes marked (or leased by nmo) that no NodeMaintenance targets.
    pub fn orphans(&self) -> Vec<String> {
        let targeted: std::collections::BTreeSet<&String> =
            self.maintenances.values().map(|(node, ..)| node).collect();
        self.marked
            .iter()
            .filter(|n| !targeted.contains(n))
            .cloned()
            .collect()
    }

    pub(super) fn converged(&self) -> bool {
        let (converged, of) = self.converged_count();
        converged == of && self.orphans().is_empty()
    }
}

/// Whether a node carries anything of a maintenance: nmo's label, either taint, the cordon
/// (unless a person cordoned it before: `admin_cordoned`) or nmo's record (the soak's nodes
/// start with none of these).
fn node_marked(node: &Value, admin_cordoned: bool) -> bool {
    let cordoned = !admin_cordoned
        && node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true);
    let tainted = node
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .is_some_and(|taints| {
            taints.iter().any(|t| {
                matches!(
                    t["key"].as_str(),
                    Some("medik8s.io/drain" | "node.kubernetes.io/unschedulable")
                )
            })
        });
    let labelled = node
        .pointer("/metadata/labels")
        .and_then(|l| l.get(EXCLUDE_LABEL))
        .is_some();
    let recorded = node
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(RECORD_ANNOTATION))
        .is_some();
    cordoned || tainted || labelled || recorded
}
