//! Trust under faults, end to end: another operator owning the node, NodeMaintenances whose
//! finalizer was removed by hand while nmo was down, answers slower than the call deadline, and
//! a leader that loses its lease with a write on the way. Those that inject faults into the
//! simulator (`env.sim()`: slow answers) are simulator only; the others run on both backends.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use nmo::cluster::KubeCluster;
use nmo::crd::NodeMaintenance;
use nmo::leader::{Fence, LEADER_ELECTION_ID};
use nmo::operator::OperatorOptions;
use nmo_actors::model::{NodePatch, RecordWrite, Uid};
use nmo_actors::ports::{Cluster, ClusterError};
use nmo_sim::{FaultRule, Query, Scenario};
use serde_json::json;

use crate::support::{
    Backend, OPERATOR_AGENT, Phase, TestEnv, both_backends, eventually, taint_keys, test_options,
};

const EXCLUDE_LABEL: &str = "remediation.medik8s.io/exclude-from-remediation";

/// The example: a remediation operator holds the node's lease and has cordoned it; a
/// NodeMaintenance waits behind it, touching nothing, and is deleted: the node stays cordoned
/// with its taint, in the middle of the remediation.
async fn deleting_a_maintenance_that_waited_behind_a_remediation_leaves_its_cordon(
    backend: Backend,
) {
    let mut env = TestEnv::on(backend)
        .nodes(1, 2)
        .foreign_lease("node-0", "self-node-remediation", Duration::from_secs(5))
        .patched_node(
            "node-0",
            json!({"spec": {
                "unschedulable": true,
                "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
            }}),
        )
        .start_with_maintenance("nm-0", "node-0")
        .await;
    env.wait_last_error_mentions(
        "nmo to wait for the lease",
        Duration::from_secs(10),
        "nm-0",
        "self-node-remediation",
    )
    .await;
    env.end_maintenance("nm-0").await;
    let node = env.node("node-0").await;
    assert_eq!(node["spec"]["unschedulable"], true, "still cordoned");
    assert_eq!(taint_keys(&node), ["node.kubernetes.io/unschedulable"]);
    assert_eq!(env.lease_holder("node-0").await, "self-node-remediation");
    env.stop_cleanly().await;
}
both_backends!(deleting_a_maintenance_that_waited_behind_a_remediation_leaves_its_cordon);

/// A NodeMaintenance's finalizer is removed by hand while nmo is down, and the object goes:
/// the next nmo finds the node it left marked and gives it back.
async fn a_node_left_marked_while_nmo_was_down_is_given_back_at_start(backend: Backend) {
    let mut env = TestEnv::on(backend)
        .nodes(2, 2)
        .start_maintaining("nm-0", "node-0")
        .await;
    env.kill_operator().await;
    env.patch_json::<NodeMaintenance>(None, "nm-0", json!({"metadata": {"finalizers": null}}))
        .await;
    env.end_maintenance("nm-0").await;
    assert_eq!(env.node("node-0").await["spec"]["unschedulable"], true);

    env.start_operator();
    eventually(
        "the orphaned node to be given back",
        Duration::from_secs(20),
        async || {
            let node = env.node("node-0").await;
            node["spec"]["unschedulable"] != true
                && taint_keys(&node).is_empty()
                && node["metadata"]["labels"][EXCLUDE_LABEL].is_null()
                && env.lease("node-0").await.is_none()
        },
    )
    .await;
    let node = env.node("node-0").await;
    assert!(
        node["metadata"]["annotations"]["nodemaintenance.medik8s.io/before-maintenance"].is_null(),
        "the record goes with the changes"
    );
    assert_ne!(env.node("node-1").await["spec"]["unschedulable"], true);
    env.stop_cleanly().await;
}
both_backends!(a_node_left_marked_while_nmo_was_down_is_given_back_at_start);

/// Answers slower than `--api-call-timeout` (the simulator delays nmo's evictions): nmo gives
/// up on them, retries, and the drain finishes; nothing waits forever. Simulator only: slow
/// answers are injected (fault injection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_answered_after_their_deadline_are_retried_and_the_drain_finishes() {
    let env = TestEnv::builder()
        .nodes(1, 3)
        .operator_options(OperatorOptions {
            api_call_timeout: Duration::from_secs(1),
            ..test_options()
        })
        .start()
        .await;
    env.sim().faults().add(
        FaultRule::on(Some("create"), Some("pods"))
            .subresource("eviction")
            .user_agent(OPERATOR_AGENT)
            .latency(Duration::from_secs(30))
            .times(2),
    );
    env.sim().faults().add(
        FaultRule::on(Some("patch"), Some("nodes"))
            .user_agent(OPERATOR_AGENT)
            .latency(Duration::from_secs(30))
            .times(1),
    );
    env.create_maintenance("nm-0", "node-0").await;
    eventually("the drain to finish", Duration::from_secs(40), async || {
        env.phase("nm-0").await == Some(Phase::Succeeded)
    })
    .await;
    env.end_maintenance("nm-0").await;
}

/// With a closed fence (this replica does not lead), a write is refused before it is sent
/// (nmo's requests counted by the simulator's accounting or the real API server's audit log).
async fn a_replica_that_does_not_lead_sends_no_write(backend: Backend) {
    let env = TestEnv::on(backend).nodes(1, 1).start_idle().await;
    let fence = Fence::open();
    fence.close();
    let adapter = KubeCluster::new(env.operator_client(), None).with_fence(fence);
    let patch = NodePatch {
        node: env.name("node-0").into(),
        expected_taints: vec![],
        expected_version: String::new(),
        desired_taints: vec![],
        unschedulable: Some(true),
        labels: Default::default(),
        record: RecordWrite::Keep,
    };
    let refused = adapter.patch_node(&patch).await;
    assert!(
        matches!(refused, Err(ClusterError::NotLeader(_))),
        "{refused:?}"
    );
    let writes = env.count_operator_requests(&Query::all().verb("patch"));
    assert_eq!(writes, 0, "nothing was sent");
    assert!(
        adapter.get_node(&env.name("node-0").into()).await.is_ok(),
        "reads still go"
    );
}
both_backends!(a_replica_that_does_not_lead_sends_no_write);

/// The leader's drift repair is on its way (its read of the node is slow) when another holder
/// takes the leader lease: the repair must never land, though nothing else stops the replica's
/// tasks here (it runs on the test's runtime, where spawned work outlives it). Simulator only:
/// the slow read is injected (fault injection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_leaders_repair_never_lands_after_it_lost_the_lease() {
    let elected = OperatorOptions {
        leader_elect: true,
        leader_elect_lease_duration: Duration::from_secs(3),
        leader_elect_renew_deadline: Duration::from_secs(2),
        leader_elect_retry_period: Duration::from_millis(300),
        ..test_options()
    };
    let mut env = TestEnv::builder()
        .nodes(1, 2)
        .operator_options(elected)
        .operator_on_test_runtime()
        .start_maintaining("nm-0", "node-0")
        .await;

    // The repair patches the node as watched; that patch loses a race (409), so the repair
    // reads the node, and that read answers only after 4 s...
    env.sim().faults().add(
        FaultRule::on(Some("patch"), Some("nodes"))
            .user_agent(OPERATOR_AGENT)
            .errors(1.0, 409)
            .times(1),
    );
    env.sim().faults().add(
        FaultRule::on(Some("get"), Some("nodes"))
            .user_agent(OPERATOR_AGENT)
            .latency(Duration::from_secs(4)),
    );
    let gets_before = env.sim().requests(
        &Query::all()
            .verb("get")
            .resource("nodes")
            .user_agent(OPERATOR_AGENT),
    );
    // ... and someone uncordons the node: nmo starts repairing it.
    env.patch_node("node-0", json!({"spec": {"unschedulable": false}}))
        .await;
    eventually(
        "the repair to read the node",
        Duration::from_secs(5),
        async || {
            env.sim().requests(
                &Query::all()
                    .verb("get")
                    .resource("nodes")
                    .user_agent(OPERATOR_AGENT),
            ) > gets_before
        },
    )
    .await;
    // Meanwhile another replica takes the leader lease.
    let patches = |env: &TestEnv| {
        env.sim().requests(
            &Query::all()
                .verb("patch")
                .resource("nodes")
                .user_agent(OPERATOR_AGENT),
        )
    };
    let renew = chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string();
    env.patch_json::<Lease>(
        Some("default"),
        LEADER_ELECTION_ID,
        json!({"spec": {"holderIdentity": "the-new-leader", "leaseDurationSeconds": 3600, "renewTime": renew}}),
    )
    .await;
    let patches_at_handover = patches(&env);
    // It notices within a renewal round (300 ms) and stops by itself.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let stopped = env.stop_operator().await;
    assert!(stopped.is_err(), "it stopped because it lost the lease");

    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(
        patches(&env),
        patches_at_handover,
        "the old leader wrote to the node after it lost the lease"
    );
    assert_ne!(
        env.node("node-0").await["spec"]["unschedulable"],
        true,
        "the old leader's repair landed"
    );
}

/// The DaemonSet lookup is shared by every drain that meets the DaemonSet's pods: a lookup
/// the API server answers late must not keep its callers waiting beyond the call deadline.
/// Simulator only: the late answer is injected (fault injection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_daemonset_lookup_keeps_none_of_its_callers_waiting() {
    let env = TestEnv::builder()
        .scenario(Scenario::new(1, 3))
        .start_idle()
        .await;
    env.sim().faults().add(
        FaultRule::on(Some("get"), Some("daemonsets"))
            .user_agent(OPERATOR_AGENT)
            .latency(Duration::from_secs(30)),
    );
    let adapter =
        KubeCluster::new(env.operator_client(), None).with_call_timeout(Duration::from_secs(1));
    // Each answers with the deadline's error, not with the DaemonSet 30 s later.
    let any = Uid::default();
    let (first, second) = tokio::join!(
        adapter.daemonset_exists("kube-system", "ds-0", &any),
        adapter.daemonset_exists("kube-system", "ds-0", &any),
    );
    assert!(
        matches!(first, Err(ClusterError::Transient(_))),
        "{first:?}"
    );
    assert!(
        matches!(second, Err(ClusterError::Transient(_))),
        "{second:?}"
    );
}
