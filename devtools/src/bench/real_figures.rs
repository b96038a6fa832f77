//! The figures only a real API server gives (`nmo bench --backend real`): nmo's wall time
//! against the floor measured in the same invocation ([`super::floor`]), and what each of the
//! two runs cost kube-apiserver and etcd ([`super::server_cost`]), per drained node.

use serde::Serialize;

use super::server_cost::ServerCost;
use crate::demo::requests::RequestTotals;

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
    /// nmo's requests beyond the pod removals, per drained node.
    pub overhead: RequestOverhead,
}

/// nmo's requests per drained node beyond the pods' removals (the evictions and the deletes of
/// finished pods, which the floor makes too), and how many of them an API server that streams
/// lists would not see.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RequestOverhead {
    /// Every request other than a pod's eviction or deletion.
    pub beyond_removals: f64,
    /// Of those, the pod LISTs that start watches: one per maintenance on an API server whose
    /// etcd cannot stream lists (3.4 before 3.4.31, 3.5 before 3.5.13); none on a current one.
    pub initial_lists: f64,
    /// `beyond_removals - initial_lists`: the figure on a current etcd.
    pub streaming_lists: f64,
}

impl RequestOverhead {
    /// The overhead of `requests` over `nodes` drained nodes.
    pub fn of(requests: &RequestTotals, nodes: usize) -> RequestOverhead {
        let beyond = requests.beyond_pod_removals();
        let lists = requests.pod_lists().min(beyond);
        RequestOverhead {
            beyond_removals: per_node(beyond, nodes),
            initial_lists: per_node(lists, nodes),
            streaming_lists: per_node(beyond - lists, nodes),
        }
    }
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

    #[test]
    fn the_overhead_leaves_out_evictions_and_pod_deletes_and_names_the_initial_lists() {
        let mut requests = RequestTotals {
            total: 100,
            evictions: 70,
            ..RequestTotals::default()
        };
        for (what, n) in [
            ("create pods/eviction", 70),
            ("delete pods", 10),
            ("list pods", 2),
            ("watch pods", 2),
            ("patch nodemaintenances/status", 16),
        ] {
            requests.by_request.insert(what.into(), n);
        }
        let overhead = RequestOverhead::of(&requests, 2);
        assert_eq!(overhead.beyond_removals, 10.0);
        assert_eq!(overhead.initial_lists, 1.0);
        assert_eq!(overhead.streaming_lists, 9.0);
    }
}
