//! `nmo plan`'s output: a table for people, JSON for scripts.

use std::fmt::Write as _;

use serde::Serialize;

use super::model::{Blocker, Plan};

/// Columns padded to their widest cell; the last one is not padded.
fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::from("  ");
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<width$}  ", width = widths[c]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The plan as text: per node its pods (what happens, the PDB and its headroom, why),
/// then the blockers and what the exit status will be.
pub fn text(plan: &Plan) -> String {
    let mut out = String::new();
    for node in &plan.nodes {
        let _ = writeln!(out, "node {} ({})", node.node, node.state);
        if node.pods.is_empty() {
            out.push_str("  no pods\n\n");
            continue;
        }
        let mut rows = vec![vec![
            "POD".to_string(),
            "ACTION".to_string(),
            "BUDGET (ALLOWED NOW, PODS ON THESE NODES)".to_string(),
            "WHY".to_string(),
        ]];
        for pod in &node.pods {
            let pdbs = if pod.pdbs.is_empty() {
                "-".to_string()
            } else {
                pod.pdbs
                    .iter()
                    .map(|b| {
                        format!(
                            "{} ({}, {})",
                            b.pdb, b.disruptions_allowed, b.pods_on_planned_nodes
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let mut why = pod.why.clone();
            if !pod.interceptors.is_empty() {
                let _ = write!(
                    why,
                    "; its eviction is seen by {}",
                    pod.interceptors.join(", ")
                );
            }
            if let Some(vm) = &pod.vm {
                let _ = write!(why, "; VM {}: {}", vm.name, vm.outcome);
            }
            rows.push(vec![
                format!("{}/{}", pod.namespace, pod.name),
                pod.action.to_string(),
                pdbs,
                why,
            ]);
        }
        out.push_str(&table(&rows));
        out.push('\n');
    }
    if plan.blockers.is_empty() {
        out.push_str("nothing predicted to block the drain\n");
    } else {
        let _ = writeln!(out, "{} blocker(s) predicted:", plan.blockers.len());
        for blocker in &plan.blockers {
            let _ = writeln!(out, "  - {blocker}");
        }
    }
    out
}

#[derive(Serialize)]
struct JsonBlocker<'a> {
    #[serde(flatten)]
    blocker: &'a Blocker,
    message: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonPlan<'a> {
    blocked: bool,
    nodes: &'a [super::model::NodePlan],
    blockers: Vec<JsonBlocker<'a>>,
}

/// The plan as JSON: `blocked`, `nodes` (each pod's action, why, PDBs and headroom) and
/// `blockers` (each with its `kind`, its fields and a `message`).
pub fn json(plan: &Plan) -> Result<String, serde_json::Error> {
    let out = JsonPlan {
        blocked: !plan.clear(),
        nodes: &plan.nodes,
        blockers: plan
            .blockers
            .iter()
            .map(|blocker| JsonBlocker {
                blocker,
                message: blocker.to_string(),
            })
            .collect(),
    };
    serde_json::to_string_pretty(&out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::model::{Action, NodePlan, PdbHeadroom, PodPlan};

    fn plan() -> Plan {
        Plan {
            nodes: vec![NodePlan {
                node: "n0".into(),
                state: "Ready".into(),
                pods: vec![PodPlan {
                    namespace: "shop".into(),
                    name: "web-0".into(),
                    action: Action::Evict,
                    why: "owned by ReplicaSet web".into(),
                    pdbs: vec![PdbHeadroom {
                        pdb: "shop/web".into(),
                        disruptions_allowed: 0,
                        pods_on_planned_nodes: 1,
                    }],
                    interceptors: Vec::new(),
                    vm: None,
                }],
            }],
            blockers: vec![Blocker::NodeMissing {
                node: "ghost".into(),
            }],
        }
    }

    #[test]
    fn the_table_names_each_pod_its_pdb_and_the_blockers() {
        let text = text(&plan());
        assert!(text.starts_with("node n0 (Ready)\n"), "{text}");
        assert!(
            text.contains("shop/web-0  evict   shop/web (0, 1)"),
            "{text}"
        );
        assert!(
            text.contains("1 blocker(s) predicted:\n  - node ghost does not exist"),
            "{text}"
        );
    }

    #[test]
    fn json_carries_the_kind_the_fields_and_a_message() {
        let value: serde_json::Value = serde_json::from_str(&json(&plan()).unwrap()).unwrap();
        assert_eq!(value["blocked"], true);
        assert_eq!(value["blockers"][0]["kind"], "nodeMissing");
        assert_eq!(value["blockers"][0]["node"], "ghost");
        assert!(
            value["blockers"][0]["message"]
                .as_str()
                .unwrap()
                .contains("ghost")
        );
        assert_eq!(value["nodes"][0]["pods"][0]["action"], "evict");
        assert_eq!(
            value["nodes"][0]["pods"][0]["budgets"][0]["disruptionsAllowed"],
            0
        );
    }
}
