//! A basic maintenance from start to end.

use std::time::Duration;

use nmo_sim::Scenario;

use super::cluster::{self, taint_keys};
use super::harness::{Operator, test_options};

const DRAIN_TAINT: &str = "medik8s.io/drain";
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";
const EXCLUDE_LABEL: &str = "remediation.medik8s.io/exclude-from-remediation";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_every_kind_of_pod_is_drained_and_restored() {
    let sim = cluster::start(Scenario::new(3, 8)).await;
    let client = cluster::test_client(&sim);
    let node = "node-0";
    let before = cluster::pods_on(&sim, node);
    let kind_of = |pod: &serde_json::Value| {
        pod["metadata"]["ownerReferences"][0]["kind"]
            .as_str()
            .unwrap_or("none")
            .to_string()
    };
    assert!(
        before.iter().any(|p| kind_of(p) == "DaemonSet"),
        "the scenario has a DaemonSet pod"
    );
    let total = before.len();

    let operator = Operator::start(cluster::operator_client(&sim), test_options());
    cluster::create_maintenance(&client, "maintain-node-0", node).await;
    cluster::wait_for(
        "the maintenance to succeed",
        Duration::from_secs(30),
        || cluster::phase(&sim, "maintain-node-0").as_deref() == Some("Succeeded"),
    )
    .await;

    let status = cluster::maintenance(&sim, "maintain-node-0").expect("exists")["status"].clone();
    assert_eq!(status["drainProgress"], 100);
    assert_eq!(status["totalpods"], total);
    assert!(
        status["lastError"].as_str().unwrap_or_default().is_empty(),
        "{status}"
    );
    assert_eq!(
        status["pendingPods"].as_array().map(Vec::len).unwrap_or(0),
        0
    );
    let node_object = cluster::node(&sim, node);
    assert_eq!(node_object["spec"]["unschedulable"], true);
    let taints = taint_keys(&node_object);
    assert!(
        taints.contains(&DRAIN_TAINT.to_string())
            && taints.contains(&UNSCHEDULABLE_TAINT.to_string()),
        "{taints:?}"
    );
    assert_eq!(node_object["metadata"]["labels"][EXCLUDE_LABEL], "true");
    let lease = cluster::lease(&sim, node).expect("the node lease exists");
    assert_eq!(lease["spec"]["holderIdentity"], "node-maintenance");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 3600);
    assert_eq!(lease["metadata"]["ownerReferences"][0]["kind"], "Node");

    // Only what a drain leaves behind: DaemonSet pods and mirror pods.
    let left = cluster::pods_on(&sim, node);
    for pod in &left {
        let mirror = pod["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_string();
        assert!(
            kind_of(pod) == "DaemonSet" || mirror,
            "pod left on the node: {}",
            pod["metadata"]["name"]
        );
    }
    assert_eq!(status["evictionPods"], total - left.len());
    let reasons = cluster::event_reasons(&sim, "maintain-node-0");
    assert!(
        reasons.contains(&"BeginMaintenance".to_string()),
        "{reasons:?}"
    );
    // As `kubectl describe nodemaintenance` finds them: core events about the cluster-scoped
    // object, with no namespace in the reference, filed in `default`.
    let described = sim
        .list_json("", "events", "default")
        .into_iter()
        .any(|event| {
            event["involvedObject"]["name"] == "maintain-node-0"
                && event["involvedObject"]["kind"] == "NodeMaintenance"
                && event["involvedObject"].get("namespace").is_none()
                && event["reason"] == "BeginMaintenance"
        });
    assert!(described, "kubectl describe would not show the events");
    assert!(
        reasons.contains(&"SucceedMaintenance".to_string()),
        "{reasons:?}"
    );

    cluster::delete_maintenance(&client, "maintain-node-0").await;
    cluster::wait_for(
        "the maintenance to be gone",
        Duration::from_secs(30),
        || cluster::maintenance(&sim, "maintain-node-0").is_none(),
    )
    .await;
    let node_object = cluster::node(&sim, node);
    assert_ne!(node_object["spec"]["unschedulable"], true);
    let taints = taint_keys(&node_object);
    assert!(
        !taints.contains(&DRAIN_TAINT.to_string())
            && !taints.contains(&UNSCHEDULABLE_TAINT.to_string()),
        "{taints:?}"
    );
    assert!(
        node_object["metadata"]["labels"]
            .get(EXCLUDE_LABEL)
            .is_none()
    );
    assert!(
        cluster::lease(&sim, node).is_none(),
        "the lease is released"
    );
    assert!(cluster::event_reasons(&sim, node).contains(&"UncordonNode".to_string()));
    assert!(
        cluster::event_reasons(&sim, "maintain-node-0").contains(&"RemovedMaintenance".to_string())
    );

    operator.stop().await.expect("the operator stops cleanly");
    sim.shutdown().await;
}
