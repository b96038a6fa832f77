//! The figures only a real API server gives (`nmo bench --backend real`): nmo's wall time
//! against the floor measured in the same invocation ([`super::floor`]), and what each of the
//! two runs cost kube-apiserver and etcd ([`super::server_cost`]), per drained node.

use std::fmt::Write as _;

use serde::Serialize;

use super::result::ScenarioResult;
use super::server_cost::ServerCost;
use crate::demo::table::Table;

/// The floor's run of a scenario.
#[derive(Debug, Clone, Serialize)]
pub struct FloorFigures {
    /// From the first request to the last pod seen gone, seconds.
    pub wall_s: f64,
    /// Median per-node time to empty, seconds.
    pub p50_s: f64,
    /// 99th percentile of the same, seconds.
    pub p99_s: f64,
    /// Pods evicted or deleted.
    pub removed: u64,
    /// Its requests as the audit log counted them (it runs as nmo's ServiceAccount).
    pub requests: u64,
    /// Its requests answered 429.
    pub too_many_requests: u64,
    /// What it cost the control plane.
    pub cost: ServerCost,
}

/// nmo's run against the floor, and both runs' cost to the control plane.
#[derive(Debug, Clone, Serialize)]
pub struct RealFigures {
    /// The floor.
    pub floor: FloorFigures,
    /// What nmo's run cost the control plane.
    pub cost: ServerCost,
    /// nmo's wall time over the floor's (None: the floor took no time).
    pub wall_over_floor: Option<f64>,
}

/// `wall / floor`, when the floor took any time at all.
pub fn ratio(wall_s: f64, floor_s: f64) -> Option<f64> {
    (floor_s > 0.0 && wall_s.is_finite()).then(|| wall_s / floor_s)
}

/// `value` per drained node, in thousandths (CPU seconds to milliseconds per node).
fn ms_per_node(seconds: f64, nodes: usize) -> f64 {
    seconds * 1000.0 / nodes.max(1) as f64
}

fn per_node(n: u64, nodes: usize) -> f64 {
    n as f64 / nodes.max(1) as f64
}

/// The real-backend figures of every scenario that has them: one row for nmo's run, one for
/// the floor's; then every run's requests by flow schema and priority level.
pub fn table(results: &[ScenarioResult]) -> String {
    let mut table = Table::new(&[
        "scenario",
        "run",
        "wall",
        "wall / floor",
        "p50",
        "p99",
        "CPU/node: nmo",
        "kube-apiserver",
        "etcd",
        "requests/node (APF)",
        "APF 429s",
        "429s (audit)",
    ]);
    let mut flows = String::new();
    for r in results {
        let Some(real) = &r.real else { continue };
        let nodes = r.maintenance;
        let f = &real.floor;
        table.row(vec![
            r.scenario.clone(),
            "nmo".into(),
            format!("{:.2} s", r.wall_s),
            real.wall_over_floor
                .map_or_else(|| "-".into(), |x| format!("{x:.2}x")),
            format!("{:.2} s", r.p50_s),
            format!("{:.2} s", r.p99_s),
            format!("{:.1} ms", r.cpu_ms_per_node),
            format!("{:.1} ms", ms_per_node(real.cost.apiserver_cpu_s, nodes)),
            format!("{:.1} ms", ms_per_node(real.cost.etcd_cpu_s, nodes)),
            format!("{:.1}", per_node(real.cost.dispatched(), nodes)),
            real.cost.rejected().to_string(),
            r.requests.too_many_requests.to_string(),
        ]);
        table.row(vec![
            r.scenario.clone(),
            "floor".into(),
            format!("{:.2} s", f.wall_s),
            "1.00x".into(),
            format!("{:.2} s", f.p50_s),
            format!("{:.2} s", f.p99_s),
            "-".into(),
            format!("{:.1} ms", ms_per_node(f.cost.apiserver_cpu_s, nodes)),
            format!("{:.1} ms", ms_per_node(f.cost.etcd_cpu_s, nodes)),
            format!("{:.1}", per_node(f.cost.dispatched(), nodes)),
            f.cost.rejected().to_string(),
            f.too_many_requests.to_string(),
        ]);
        let _ = writeln!(flows, "{:<6} nmo   {}", r.scenario, real.cost.flows_line());
        let _ = writeln!(flows, "{:<6} floor {}", r.scenario, f.cost.flows_line());
    }
    let mut out = table.render();
    out.push_str(
        "\nrequests by flow schema / priority level (every client of the control plane):\n",
    );
    out.push_str(&flows);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_is_wall_over_floor_and_none_without_a_floor() {
        assert_eq!(ratio(4.81, 3.7), Some(4.81 / 3.7));
        assert!(ratio(3.0, 2.0).is_some_and(|x| (x - 1.5).abs() < 1e-12));
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(f64::INFINITY, 1.0), None);
    }

    #[test]
    fn per_node_figures_divide_by_the_drained_nodes() {
        assert_eq!(ms_per_node(2.5, 50), 50.0);
        assert_eq!(per_node(700, 50), 14.0);
        // No node: no division by zero.
        assert_eq!(per_node(7, 0), 7.0);
    }
}
