//! The benchmark scenarios: what cluster is simulated and how much of it goes into
//! maintenance at once.

use std::time::Duration;

use serde::Serialize;
use serde_json::json;

use nmo_sim::{Scenario, Timing};

use super::interactions::{ExpectedBlock, Traps};

/// One benchmark scenario.
#[derive(Debug, Clone, Serialize)]
pub struct BenchScenario {
    /// Short name (`a`, `b100`, ...).
    pub name: String,
    /// What it measures.
    pub title: String,
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Pods per node.
    pub pods_per_node: usize,
    /// Nodes put into maintenance at once.
    pub maintenance: usize,
    /// Spread ReplicaSets (fewer: more pods of one budget on the maintained nodes).
    pub replicasets: Option<usize>,
    /// `maxUnavailable` of each spread ReplicaSet's budget (None: no budgets).
    pub pdb_max_unavailable: Option<u32>,
    /// Simulated time scale (0: instant kubelet, 1: 30 s grace periods and 2 s start-up).
    pub time_scale: f64,
    /// Evictions per second nmo may make, cluster wide (`--eviction-rate`; None: nmo's
    /// default).
    pub eviction_rate: Option<f64>,
    /// Give up after this long.
    #[serde(skip)]
    pub timeout: Duration,
    /// Budget traps added to the cluster (scenario d), with what nmo must say about them.
    #[serde(skip)]
    pub traps: Option<Traps>,
}

impl BenchScenario {
    /// The simulated workload.
    pub fn scenario(&self) -> Scenario {
        let mut s = Scenario::new(self.nodes, self.pods_per_node).pdb(
            self.pdb_max_unavailable
                .map(|m| json!({"maxUnavailable": m})),
        );
        if let Some(n) = self.replicasets {
            s = s.replicasets(n);
        }
        s
    }

    /// The simulated kubelet.
    pub fn timing(&self) -> Timing {
        Timing {
            time_scale: self.time_scale,
            ..Timing::default()
        }
    }

    /// The same scenario at `nodes` nodes, with as large a share of them in maintenance
    /// (at least one), and a timeout grown with the pods to drain (never shrunk: a smaller
    /// run keeps the scenario's own, whose margin covers start-up).
    #[must_use]
    pub fn with_nodes(mut self, nodes: usize) -> BenchScenario {
        let share = self.maintenance as f64 / self.nodes.max(1) as f64;
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a share of a node count, between 0 and the count"
        )]
        let maintained = (share * nodes as f64).round() as usize;
        let maintained = maintained.clamp(1, nodes.max(1));
        let growth = maintained as f64 / self.maintenance.max(1) as f64;
        self.timeout = self.timeout.mul_f64(growth.max(1.0));
        self.maintenance = maintained;
        self.title = format!(
            "{nodes} nodes x {} pods, {maintained} at once (resized from: {})",
            self.pods_per_node, self.title
        );
        self.nodes = nodes;
        self
    }

    /// Nodes put into maintenance.
    pub fn maintained_nodes(&self) -> Vec<String> {
        let s = self.scenario();
        (0..self.maintenance).map(|i| s.node_name(i)).collect()
    }

    /// The maintenances that must end blocked, and what each must show.
    pub fn expected_blocks(&self) -> Vec<ExpectedBlock> {
        let s = self.scenario();
        self.traps
            .map(|t| t.expected(|i| s.node_name(i)))
            .unwrap_or_default()
    }

    /// Whether budgets drive this scenario (its drain policy figures are printed).
    pub fn has_pdbs(&self) -> bool {
        self.pdb_max_unavailable.is_some() || self.traps.is_some()
    }

    /// A replacement pod's start-up time in this scenario.
    pub fn startup(&self) -> Duration {
        let timing = self.timing();
        timing.pod_startup.mul_f64(timing.time_scale)
    }

    /// The grace period an evicted pod of this scenario terminates in (30 s, scaled).
    pub fn grace(&self) -> Duration {
        Duration::from_secs(30).mul_f64(self.time_scale)
    }
}

/// a: 50 nodes x 10 pods, all in maintenance at once, instant kubelet. Every node is drained,
/// so no replacement can be scheduled: budgets would block forever, and there are none.
pub fn all_at_once() -> BenchScenario {
    BenchScenario {
        name: "a".into(),
        title: "50 nodes x 10 pods, all 50 at once, instant kubelet".into(),
        nodes: 50,
        pods_per_node: 10,
        maintenance: 50,
        replicasets: None,
        pdb_max_unavailable: None,
        time_scale: 0.0,
        eviction_rate: None,
        timeout: Duration::from_secs(120),
        traps: None,
    }
}

/// a-fast: a with nmo's cluster-wide eviction rate raised from 50/s (burst 100) to 500/s: a's
/// 350 evictions alone take 5 s at the default rate, so this shows what the limit costs.
pub fn all_at_once_unthrottled() -> BenchScenario {
    BenchScenario {
        name: "a-fast".into(),
        title: "a with --eviction-rate 500".into(),
        eviction_rate: Some(500.0),
        ..all_at_once()
    }
}

/// b: `nodes` x 30 pods, a quarter of the nodes at once, instant kubelet, no budgets. nmo's
/// cluster-wide eviction rate limit (50/s by default) would make the wall time a measure of
/// that limit alone at this size, so it is raised: the point here is the cost per node.
pub fn scaling(nodes: usize) -> BenchScenario {
    BenchScenario {
        name: format!("b{nodes}"),
        title: format!("{nodes} nodes x 30 pods, 25% at once, instant kubelet"),
        nodes,
        pods_per_node: 30,
        maintenance: nodes / 4,
        replicasets: None,
        pdb_max_unavailable: None,
        time_scale: 0.0,
        eviction_rate: Some(1000.0),
        timeout: Duration::from_secs(900),
        traps: None,
    }
}

/// c: budgets (`maxUnavailable: 1`) over few ReplicaSets spread across the maintained nodes,
/// and a kubelet in real time (30 s grace periods, 2 s start-up): evictions are refused until
/// the replacements are Ready.
pub fn pdb_constrained() -> BenchScenario {
    BenchScenario {
        name: "c".into(),
        title:
            "20 nodes x 10 pods, 5 at once, 4 ReplicaSets with maxUnavailable 1, real-time kubelet"
                .into(),
        nodes: 20,
        pods_per_node: 10,
        maintenance: 5,
        replicasets: Some(4),
        pdb_max_unavailable: Some(1),
        time_scale: 1.0,
        eviction_rate: None,
        timeout: Duration::from_secs(600),
        traps: None,
    }
}

/// d: budgets, replacements and several draining nodes interacting. 7 of 12 nodes at once; 4
/// ReplicaSets with `maxUnavailable: 1` spread over every node (their budgets span the
/// maintained nodes, whose drains share each budget's allowance); on node-4 the pod of a
/// `maxUnavailable: 0` budget (structural: that maintenance must say so); on node-5 and node-6
/// the 4 pods of a ReplicaSet that may run only on those two (its replacement fits only nodes
/// the other maintenance cordons: a cross-node deadlock, each must name the other). Real-time
/// kubelet.
pub fn interacting() -> BenchScenario {
    BenchScenario {
        name: "d".into(),
        title: "12 nodes x 10 pods, 7 at once: budgets spanning nodes, a structural budget, a cross-node deadlock, real-time kubelet".into(),
        nodes: 12,
        pods_per_node: 10,
        maintenance: 7,
        replicasets: Some(4),
        pdb_max_unavailable: Some(1),
        time_scale: 1.0,
        eviction_rate: None,
        timeout: Duration::from_secs(300),
        traps: Some(Traps {
            structural: 4,
            pair: (5, 6),
        }),
    }
}

/// Every scenario, in the order they run.
pub fn all() -> Vec<BenchScenario> {
    vec![
        all_at_once(),
        all_at_once_unthrottled(),
        scaling(100),
        scaling(500),
        scaling(2000),
        pdb_constrained(),
        interacting(),
    ]
}

/// The scenarios named (`a`, `b`, `b100`, `b500`, `b2000`, `c`, `d`; `b` is all three sizes).
pub fn by_names(names: &[String]) -> Vec<BenchScenario> {
    if names.is_empty() {
        return all();
    }
    all()
        .into_iter()
        .filter(|s| {
            names
                .iter()
                .any(|n| n == &s.name || (n == "b" && s.name.starts_with('b')))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b_selects_every_scaling_size() {
        let names: Vec<String> = by_names(&["b".into()])
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["b100", "b500", "b2000"]);
        assert_eq!(by_names(&[]).len(), 7);
        assert_eq!(by_names(&["c".into(), "a".into()]).len(), 2);
    }

    #[test]
    fn a_scenario_at_another_size_keeps_its_share_in_maintenance() {
        let a = all_at_once().with_nodes(20);
        assert_eq!((a.nodes, a.maintenance), (20, 20));
        let c = pdb_constrained().with_nodes(8);
        assert_eq!((c.nodes, c.maintenance), (8, 2));
        assert_eq!(scaling(100).with_nodes(2).maintenance, 1);
    }

    #[test]
    fn the_timeout_grows_with_the_nodes_drained_and_never_shrinks() {
        let a = all_at_once();
        assert_eq!(a.timeout, Duration::from_secs(120));
        assert_eq!(a.clone().with_nodes(500).timeout, Duration::from_secs(1200));
        assert_eq!(
            a.clone().with_nodes(1000).timeout,
            Duration::from_secs(2400)
        );
        assert_eq!(a.clone().with_nodes(20).timeout, Duration::from_secs(120));
        // The title says the size that runs, not the scenario's base size.
        assert!(
            a.with_nodes(20)
                .title
                .starts_with("20 nodes x 10 pods, 20 at once"),
            "the resized title"
        );
        // b keeps a quarter in maintenance: 2000 -> 4000 nodes doubles its timeout.
        assert_eq!(
            scaling(2000).with_nodes(4000).timeout,
            scaling(2000).timeout * 2
        );
    }

    #[test]
    fn d_expects_a_structural_pdb_and_a_deadlock_naming_each_other() {
        let d = interacting();
        let expected = d.expected_blocks();
        let reasons: Vec<(&str, &str, &str)> = expected
            .iter()
            .map(|e| (e.node.as_str(), e.reason, e.mentions.as_str()))
            .collect();
        assert_eq!(
            reasons,
            [
                ("node-4", "StructuralBudget", "maxUnavailable is 0"),
                ("node-5", "CrossNodeDeadlock", "nm-node-6"),
                ("node-6", "CrossNodeDeadlock", "nm-node-5"),
            ]
        );
        assert!(d.maintained_nodes().contains(&"node-6".to_string()));
        assert!(d.has_pdbs() && !all_at_once().has_pdbs());
    }

    #[test]
    fn a_quarter_of_the_nodes_go_into_maintenance_when_scaling() {
        assert_eq!(scaling(2000).maintained_nodes().len(), 500);
    }
}
