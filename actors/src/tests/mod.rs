//! Actor tests against the in-memory fake cluster, with paused tokio time (hours of lease
//! renewal run in milliseconds), one file per topic. The harness, the scenario builder, the
//! fixtures and the waits are [`crate::fake`]'s, shared with the operator's integration tests;
//! the starting points several files share (`nm1_succeeded`, ...) are here.

mod blocked;
mod drain;
mod eviction;
mod faults;
mod fleet;
mod intercepted;
mod lease;
mod lifecycle;
mod pdbs;
mod races;
mod reads;
mod resilience;
mod right_pod;
mod status;
mod supervisor;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::config::defaults::LEASE_NAMESPACE as NS;
use crate::decisions;
use crate::fake::{FakeCluster, Harness, Scenario, eventually, foreign_lease, t0};
use crate::model::{
    DRAIN_TAINT_KEY, EXCLUDE_LABEL, EventTarget, EventType, LEASE_HOLDER, Lease, Maintenance,
    MaintenanceStatus, NodeState, Phase, PodInfo, PodPhase, PodRef, Taint, UNSCHEDULABLE_TAINT_KEY,
    conditions,
};
use crate::ports::{ClusterError, EvictionOutcome};

fn phase(cluster: &FakeCluster, nm: &str) -> Option<Phase> {
    cluster.status(nm).phase
}

fn foreign_taint() -> Taint {
    Taint {
        key: "example.com/gpu".into(),
        value: Some("broken".into()),
        effect: "NoExecute".into(),
        time_added: None,
    }
}

fn assert_in_maintenance(cluster: &FakeCluster, node: &str) {
    let n = cluster.node(node).unwrap();
    assert!(
        decisions::node_in_maintenance(&n),
        "node not in maintenance: {n:?}"
    );
}

fn assert_released(cluster: &FakeCluster, node: &str) {
    let n = cluster.node(node).unwrap();
    assert!(!n.unschedulable, "still cordoned");
    assert!(!n.labels.contains_key(EXCLUDE_LABEL), "still labelled");
    assert!(
        !n.taints
            .iter()
            .any(|t| t.key == DRAIN_TAINT_KEY || t.key == UNSCHEDULABLE_TAINT_KEY),
        "still tainted: {:?}",
        n.taints
    );
}

/// Who holds the lease of node `node` (it must have one).
fn lease_holder(cluster: &FakeCluster, node: &str) -> Option<String> {
    let lease = cluster.lease(NS, &format!("node-{node}"));
    lease.expect("the node lease").holder_identity
}

/// Sets node `node`'s `unschedulable`, as a person's `kubectl cordon` or `uncordon` does (no
/// taint, no label).
fn set_unschedulable(cluster: &FakeCluster, node: &str, unschedulable: bool) {
    let mut n = cluster.node(node).unwrap();
    n.unschedulable = unschedulable;
    cluster.set_node(n);
}

/// Waits until node `node` is schedulable; false once `within` has passed.
async fn wait_uncordoned(cluster: &FakeCluster, node: &str, within: Duration) -> bool {
    eventually(within, || !cluster.node(node).unwrap().unschedulable).await
}

/// Waits until node `node` has no lease; false once `within` has passed.
async fn wait_no_lease(cluster: &FakeCluster, node: &str, within: Duration) -> bool {
    eventually(within, || {
        cluster.lease(NS, &format!("node-{node}")).is_none()
    })
    .await
}

/// Node `n1` with `pods` pods, all under PDB `pdb` that allows no disruption.
fn n1_under_a_closed_pdb(pods: usize, pdb: &str) -> FakeCluster {
    let cluster = FakeCluster::with_node("n1", pods);
    let names: Vec<String> = (0..pods).map(|i| format!("n1-p{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    cluster.add_pdb("app", pdb, &refs, 0);
    cluster
}

fn transient(n: usize) -> Vec<ClusterError> {
    (0..n)
        .map(|_| ClusterError::Transient("etcd timeout".into()))
        .collect()
}

fn taint_keys(node: &NodeState) -> Vec<&str> {
    node.taints.iter().map(|t| t.key.as_str()).collect()
}

/// A node cordoned by someone else, as `kubectl cordon` and the node lifecycle controller
/// leave it.
fn cordoned_by_someone_else(name: &str) -> NodeState {
    let mut node = NodeState::test(name);
    node.unschedulable = true;
    node.taints
        .push(Taint::no_schedule(UNSCHEDULABLE_TAINT_KEY));
    node
}

/// `nm1` Succeeded (within `within`) on `n1`, which had `pods` pods `app/n1-p<i>`, with the
/// default configuration: where most tests of a maintenance in place start.
async fn nm1_succeeded(pods: usize, within: Duration) -> (FakeCluster, Harness) {
    let cluster = FakeCluster::with_node("n1", pods);
    let h = Scenario::on(&cluster).nm1().start().await;
    assert!(h.wait_succeeded("nm1", within).await);
    (cluster, h)
}

/// `nm1` started on `n1` (the cluster's, as the test prepared it) behind a valid lease of
/// `node-healthcheck` renewed at [`t0`] for `seconds`, seen waiting for it within `within`.
async fn waiting_behind_a_foreign_lease(
    cluster: &FakeCluster,
    seconds: i32,
    within: Duration,
) -> Harness {
    cluster.put_lease(foreign_lease(t0(), seconds, 1));
    let h = Scenario::on(cluster).nm1().start().await;
    assert!(h.wait_error("nm1", "node-healthcheck", within).await);
    h
}

/// `nm1` Succeeded on `n1` (one pod), its lease renewed every 10 s: the start of the tests of
/// what happens to a maintenance in place when the lease or the API fails.
async fn succeeded_with_renewals_every_10s() -> (FakeCluster, Harness) {
    let cluster = FakeCluster::with_node("n1", 1);
    let h = Scenario::on(&cluster)
        .config(|c| c.lease_renew_interval = Duration::from_secs(10))
        .nm1()
        .start()
        .await;
    assert!(h.wait_succeeded("nm1", Duration::from_secs(30)).await);
    (cluster, h)
}
