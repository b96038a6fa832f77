//! nmo end to end: the operator in-process against the simulated API server and a real
//! kube-apiserver (`both_backends!`), through the real kube client, checking nodes, pods,
//! leases, statuses and events. The few that stay on the simulator say why.

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
