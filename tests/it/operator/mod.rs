//! nmo end to end: the operator in-process against the simulated API server and a real
//! kube-apiserver (`both_backends!`), through the real kube client, checking nodes, pods,
//! leases, statuses and events. The few that stay on the simulator say why.

use crate::support::{Backend, TestEnv, TestEnvBuilder};

mod api_server;
mod coexistence;
mod daemonsets;
mod deadline;
mod diagnosis;
mod drain;
mod faults;
mod finalizer;
mod fleet;
mod flow_control;
mod late_writes;
mod leader;
mod lease;
mod not_ready;
mod pdb;
mod prior_state;
mod rbac;
mod restart;
mod right_pod;
mod safety;
mod self_placement;
mod spec_limits;
mod stopping;
mod traffic;
mod watch_lists;

/// Two nodes without PDBs of their own, plus a pod on node-0 that a PDB protects completely.
pub(super) fn cluster_with_a_blocked_pod(backend: Backend) -> TestEnvBuilder {
    TestEnv::on(backend).nodes(2, 4).precious_pods(&["db-0"], 1)
}

/// [`cluster_with_a_blocked_pod`] with nmo running and `nm-0` for node-0 blocked by the budget.
pub(super) async fn node_0_blocked(backend: Backend) -> TestEnv {
    let env = cluster_with_a_blocked_pod(backend)
        .start_with_maintenance("nm-0", "node-0")
        .await;
    env.wait_blocked_by("nm-0", "db-budget").await;
    env
}
