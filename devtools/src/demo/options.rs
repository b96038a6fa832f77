//! The demo's knobs (`nmo demo --help`) and the simulated workload they describe.

use std::time::Duration;

use serde_json::json;

use super::error::DemoError;
use nmo_sim::{Scenario, Timing};

/// Flags of `nmo demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoOptions {
    /// Nodes in the simulated cluster.
    #[arg(long, default_value_t = 8)]
    pub nodes: usize,
    /// Pods per node: spread ReplicaSets, plus one DaemonSet pod, one mirror pod, one emptyDir
    /// pod, one unmanaged pod and one finished pod on every node.
    #[arg(long, default_value_t = 12)]
    pub pods_per_node: usize,
    /// Nodes put into maintenance at once.
    #[arg(long, default_value_t = 4)]
    pub maintenance: usize,
    /// `maxUnavailable` of the PodDisruptionBudget of every spread ReplicaSet (0: no budgets).
    #[arg(long, default_value_t = 1)]
    pub pdb_max_unavailable: u32,
    /// Speed of the simulated kubelet as a time scale: 1.0 is real time (30 s termination grace
    /// periods, 2 s pod start-up), 0 is instant.
    #[arg(long, default_value_t = 0.1)]
    pub kubelet_speed: f64,
    /// Keep the simulator and nmo serving after the drain: writes a kubeconfig, prints a
    /// `kubectl get nm -w` line to paste, and waits for Ctrl-C before restoring the nodes.
    #[arg(long)]
    pub keep: bool,
    /// Give up waiting for the drains after this many seconds.
    #[arg(long, default_value_t = 120)]
    pub timeout_secs: u64,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            nodes: 8,
            pods_per_node: 12,
            maintenance: 4,
            pdb_max_unavailable: 1,
            kubelet_speed: 0.1,
            keep: false,
            timeout_secs: 120,
        }
    }
}

impl DemoOptions {
    /// Refuses combinations that cannot finish.
    pub fn validate(&self) -> Result<(), DemoError> {
        if self.nodes == 0 || self.maintenance == 0 {
            return Err(DemoError::Options(
                "--nodes and --maintenance must be at least 1".into(),
            ));
        }
        if self.maintenance > self.nodes {
            return Err(DemoError::Options(format!(
                "--maintenance {} is more than --nodes {}",
                self.maintenance, self.nodes
            )));
        }
        // Evicted pods are replaced on nodes not in maintenance; with budgets and no such node
        // no replacement ever becomes Ready and the drains wait forever (as they would in a
        // real cluster).
        if self.pdb_max_unavailable > 0 && self.maintenance == self.nodes {
            return Err(DemoError::Options(
                "with PodDisruptionBudgets at least one node must stay out of maintenance \
                 (lower --maintenance or set --pdb-max-unavailable 0)"
                    .into(),
            ));
        }
        if !(self.kubelet_speed >= 0.0 && self.kubelet_speed.is_finite()) {
            return Err(DemoError::Options(
                "--kubelet-speed must be a finite number >= 0".into(),
            ));
        }
        Ok(())
    }

    /// The workload: spread ReplicaSets with budgets (when asked), a DaemonSet, mirror,
    /// emptyDir, unmanaged and finished pods.
    pub fn scenario(&self) -> Scenario {
        let pdb = (self.pdb_max_unavailable > 0)
            .then(|| json!({"maxUnavailable": self.pdb_max_unavailable}));
        Scenario::new(self.nodes, self.pods_per_node).pdb(pdb)
    }

    /// The simulated kubelet's timing.
    pub fn timing(&self) -> Timing {
        Timing {
            time_scale: self.kubelet_speed,
            ..Timing::default()
        }
    }

    /// How long to wait for the drains.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs)
    }

    /// The nodes put into maintenance.
    pub fn maintained_nodes(&self, scenario: &Scenario) -> Vec<String> {
        (0..self.maintenance)
            .map(|i| scenario.node_name(i))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid() {
        assert!(DemoOptions::default().validate().is_ok());
    }

    #[test]
    fn pdbs_with_every_node_in_maintenance_are_refused() {
        let options = DemoOptions {
            nodes: 3,
            maintenance: 3,
            ..DemoOptions::default()
        };
        assert!(matches!(options.validate(), Err(DemoError::Options(_))));
        let without_pdbs = DemoOptions {
            pdb_max_unavailable: 0,
            ..options
        };
        assert!(without_pdbs.validate().is_ok());
    }

    #[test]
    fn more_maintenance_than_nodes_is_refused() {
        let options = DemoOptions {
            nodes: 2,
            maintenance: 5,
            ..DemoOptions::default()
        };
        assert!(options.validate().is_err());
    }
}
