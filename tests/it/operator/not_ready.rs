//! Pods that can never finish terminating: on a node whose Ready condition is False or
//! Unknown no kubelet finishes them, so the drain says so (`NodeNotReady`, the node's Ready
//! condition, since when, the pods), as a blocker, in lastError and in an event, and deletes
//! nothing by force.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::support::{Backend, Phase, TestEnv, both_backends, eventually};

/// No kubelet (a static cluster): the evicted pods stay terminating, as on a node that died.
async fn pods_stuck_terminating_on_a_node_that_is_not_ready_are_diagnosed(backend: Backend) {
    let mut env = TestEnv::on(backend)
        .nodes(1, 0)
        .static_cluster()
        .namespace_with_pods("apps", "app", &[("app-0", "node-0"), ("app-1", "node-0")])
        .start_with_maintenance("nm-0", "node-0")
        .await;
    eventually(
        "both pods to be terminating",
        Duration::from_secs(20),
        async || {
            let pods = env.pods_on("node-0").await;
            pods.len() == 2
                && pods
                    .iter()
                    .all(|p| !p["metadata"]["deletionTimestamp"].is_null())
        },
    )
    .await;
    assert!(env.condition("nm-0", "DrainBlocked").await.is_null());

    // The node's kubelet is gone: the node controller's Unknown.
    let since = "2026-11-30T10:00:00Z";
    let status = json!({"status": {"conditions": [{
        "type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status.",
        "lastHeartbeatTime": since, "lastTransitionTime": since
    }]}});
    Api::<Node>::all(env.admin_client())
        .patch_status(
            &env.name("node-0"),
            &PatchParams::default(),
            &Patch::Strategic(&status),
        )
        .await
        .expect("the node's status is patched");

    env.wait_drain_blocked("nm-0", "NodeNotReady", Duration::from_secs(20))
        .await;
    let blocked = env.condition("nm-0", "DrainBlocked").await;
    let message = blocked["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("Ready=Unknown, NodeStatusUnknown, since 2026-11-30T10:00:00Z"),
        "{blocked}"
    );
    let status = env.status("nm-0").await;
    let last_error = status["lastError"].as_str().unwrap_or_default();
    for pod in ["app-0", "app-1"] {
        assert!(
            last_error.contains(pod),
            "lastError names {pod}: {last_error}"
        );
    }
    assert!(
        status["pendingPodsReasons"]
            .as_array()
            .is_some_and(|r| r.iter().all(|r| r["diagnosis"] == "NodeNotReady")),
        "{status}"
    );
    env.wait_event(
        "a DrainBlocked event",
        "nm-0",
        "DrainBlocked",
        &["NodeNotReady"],
    )
    .await;
    assert_eq!(
        env.pods_on("node-0").await.len(),
        2,
        "nothing force-deleted"
    );
    assert_eq!(env.phase("nm-0").await, Some(Phase::Running));
    env.stop_cleanly().await;
}

both_backends!(pods_stuck_terminating_on_a_node_that_is_not_ready_are_diagnosed);
