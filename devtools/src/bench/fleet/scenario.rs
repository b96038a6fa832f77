//! The fleet scenarios.

use std::time::Duration;

use serde::Serialize;

use nmo_sim::Scenario;

/// One fleet scenario.
#[derive(Debug, Clone, Serialize)]
pub struct FleetScenario {
    /// Short name.
    pub name: String,
    /// What it measures.
    pub title: String,
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Pods per node.
    pub pods_per_node: usize,
    /// NodeMaintenances created at once.
    pub maintenances: usize,
    /// `--max-parallel-maintenances` and `--max-unavailable-nodes` (None: no budget).
    pub budget: Option<String>,
    /// Give up after this long.
    #[serde(skip)]
    pub timeout: Duration,
}

impl FleetScenario {
    /// The simulated workload: spread ReplicaSets without budgets, instant kubelet.
    pub fn scenario(&self) -> Scenario {
        Scenario::plain(self.nodes, self.pods_per_node).pdb(None)
    }

    /// The nodes put into maintenance.
    pub fn maintained_nodes(&self) -> Vec<String> {
        let s = self.scenario();
        (0..self.maintenances).map(|i| s.node_name(i)).collect()
    }

    /// The budget's flags for `nmo run`.
    pub fn operator_args(&self) -> Vec<String> {
        let mut args = vec!["--eviction-rate".to_string(), "1000".to_string()];
        if let Some(budget) = &self.budget {
            args.extend([
                "--max-parallel-maintenances".to_string(),
                budget.clone(),
                "--max-unavailable-nodes".to_string(),
                budget.clone(),
            ]);
        }
        args
    }

    /// The budget as a number of nodes (a percentage of the nodes, rounded down, at least 1).
    pub fn budget_nodes(&self) -> Option<usize> {
        let budget = self.budget.as_deref()?;
        let limit: nmo_actors::fleet::Limit = budget.parse().ok()?;
        Some(limit.of(self.nodes))
    }
}

/// fleet: 200 nodes x 10 pods, 100 NodeMaintenances at once, budget 10% (20 nodes).
pub fn fleet() -> FleetScenario {
    FleetScenario {
        name: "fleet".into(),
        title: "200 nodes x 10 pods, 100 maintenances at once, budget 10%".into(),
        nodes: 200,
        pods_per_node: 10,
        maintenances: 100,
        budget: Some("10%".into()),
        timeout: Duration::from_secs(300),
    }
}

/// fleet2000: 2,000 nodes, 100 maintenances, budget 10% (200: all start at once); the cost of
/// the node summary watch at 2,000 nodes.
pub fn fleet_2000() -> FleetScenario {
    FleetScenario {
        name: "fleet2000".into(),
        title: "2000 nodes x 5 pods, 100 maintenances, budget 10% (node summaries)".into(),
        nodes: 2000,
        pods_per_node: 5,
        maintenances: 100,
        budget: Some("10%".into()),
        timeout: Duration::from_secs(600),
    }
}

/// fleet2000-off: fleet2000 without a budget (no node summary watch): the baseline.
pub fn fleet_2000_off() -> FleetScenario {
    FleetScenario {
        name: "fleet2000-off".into(),
        title: "fleet2000 without a budget (baseline)".into(),
        budget: None,
        ..fleet_2000()
    }
}

/// Every fleet scenario.
pub fn all() -> Vec<FleetScenario> {
    vec![fleet(), fleet_2000(), fleet_2000_off()]
}

/// The fleet scenarios named (`fleet` alone is the first; `fleet*` all of them).
pub fn by_names(names: &[String]) -> Vec<FleetScenario> {
    if names.is_empty() {
        return all();
    }
    all()
        .into_iter()
        .filter(|s| names.iter().any(|n| n == &s.name || n == "fleet*"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_of_fleet_is_20_nodes_and_both_flags_carry_it() {
        assert_eq!(fleet().budget_nodes(), Some(20));
        let args = fleet().operator_args();
        assert!(
            args.windows(2)
                .any(|w| w == ["--max-parallel-maintenances", "10%"])
        );
        assert!(
            args.windows(2)
                .any(|w| w == ["--max-unavailable-nodes", "10%"])
        );
        assert_eq!(fleet_2000_off().budget_nodes(), None);
        assert_eq!(by_names(&["fleet".into()]).len(), 1);
        assert_eq!(by_names(&["fleet*".into()]).len(), 3);
    }
}
