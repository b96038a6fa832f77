//! The figures only a real API server gives (`nmo bench --backend real`): nmo's wall time
//! against the floor measured in the same invocation ([`super::floor`]), and what each of the
//! two runs cost kube-apiserver and etcd ([`super::server_cost`]), per drained node.

use serde::Serialize;

use super::server_cost::ServerCost;

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
pub(super) fn ms_per_node(seconds: f64, nodes: usize) -> f64 {
    seconds * 1000.0 / nodes.max(1) as f64
}

/// `n` per drained node.
pub(super) fn per_node(n: u64, nodes: usize) -> f64 {
    n as f64 / nodes.max(1) as f64
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
