//! A basic maintenance from start to end.

use nmo_sim::Scenario;

use crate::support::{Backend, TestEnv, both_backends, taint_keys};

const DRAIN_TAINT: &str = "medik8s.io/drain";
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";
const EXCLUDE_LABEL: &str = "remediation.medik8s.io/exclude-from-remediation";

async fn a_node_with_every_kind_of_pod_is_drained_and_restored(backend: Backend) {
    let mut env = TestEnv::on(backend)
        .scenario(Scenario::new(3, 8))
        .start()
        .await;
    let node = "node-0";
    let before = env.pods_on(node).await;
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

    env.create_maintenance("maintain-node-0", node).await;
    env.wait_succeeded("maintain-node-0").await;

    let status = env.maintenance("maintain-node-0").await.expect("exists")["status"].clone();
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
    let node_object = env.node(node).await;
    assert_eq!(node_object["spec"]["unschedulable"], true);
    let taints = taint_keys(&node_object);
    assert!(
        taints.contains(&DRAIN_TAINT.to_string())
            && taints.contains(&UNSCHEDULABLE_TAINT.to_string()),
        "{taints:?}"
    );
    assert_eq!(node_object["metadata"]["labels"][EXCLUDE_LABEL], "true");
    let lease = env.lease(node).await.expect("the node lease exists");
    assert_eq!(lease["spec"]["holderIdentity"], "node-maintenance");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 3600);
    assert_eq!(lease["metadata"]["ownerReferences"][0]["kind"], "Node");

    // Only what a drain leaves behind: DaemonSet pods and mirror pods.
    let left = env.pods_on(node).await;
    for pod in &left {
        let mirror = pod["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_string();
        assert!(
            kind_of(pod) == "DaemonSet" || mirror,
            "pod left on the node: {}",
            pod["metadata"]["name"]
        );
    }
    assert_eq!(status["evictionPods"], total - left.len());
    let reasons = env.event_reasons("maintain-node-0").await;
    assert!(
        reasons.contains(&"BeginMaintenance".to_string()),
        "{reasons:?}"
    );
    // As `kubectl describe nodemaintenance` finds them: core events about the cluster-scoped
    // object, with no namespace in the reference, filed in `default`.
    let described = env.events().await.into_iter().any(|event| {
        event["involvedObject"]["name"] == env.name("maintain-node-0").as_str()
            && event["involvedObject"]["kind"] == "NodeMaintenance"
            && event["involvedObject"].get("namespace").is_none()
            && event["reason"] == "BeginMaintenance"
    });
    assert!(described, "kubectl describe would not show the events");
    assert!(
        reasons.contains(&"SucceedMaintenance".to_string()),
        "{reasons:?}"
    );

    env.end_maintenance("maintain-node-0").await;
    let node_object = env.node(node).await;
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
    assert!(env.lease(node).await.is_none(), "the lease is released");
    assert!(
        env.event_reasons(node)
            .await
            .contains(&"UncordonNode".to_string())
    );
    assert!(
        env.event_reasons("maintain-node-0")
            .await
            .contains(&"RemovedMaintenance".to_string())
    );

    env.stop_operator()
        .await
        .expect("the operator stops cleanly");
}
both_backends!(a_node_with_every_kind_of_pod_is_drained_and_restored);
