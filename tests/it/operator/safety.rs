//! What nmo must never do: touch a node that is not its to touch, lose someone else's taints,
//! or leave a node half restored.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{Backend, Phase, TestEnv, both_backends, eventually, taint_keys};

async fn a_missing_node_fails_the_maintenance_with_a_reason(backend: Backend) {
    let mut env = TestEnv::on(backend)
        .nodes(1, 2)
        .start_with_maintenance("nm-ghost", "no-such-node")
        .await;
    env.wait_failed("nm-ghost").await;
    let error = env.last_error("nm-ghost").await;
    assert!(
        error.contains("no-such-node"),
        "lastError names the node: {error}"
    );
    // Events are sent alongside the status, not before it.
    eventually(
        "the FailedMaintenance event",
        Duration::from_secs(5),
        async || {
            env.event_reasons("nm-ghost")
                .await
                .contains(&"FailedMaintenance".to_string())
        },
    )
    .await;
    assert!(
        env.lease("no-such-node").await.is_none(),
        "no lease for a node that does not exist"
    );
    env.stop_cleanly().await;
}

async fn a_second_maintenance_for_a_node_fails_and_deleting_it_undoes_nothing(backend: Backend) {
    let mut env = TestEnv::on(backend)
        .budgeted_nodes(2, 3)
        .start_maintaining("nm-first", "node-0")
        .await;
    env.create_maintenance("nm-second", "node-0").await;
    env.wait_failed("nm-second").await;
    let error = env.last_error("nm-second").await;
    assert!(
        error.contains("nm-first"),
        "the reason names the active maintenance: {error}"
    );

    env.end_maintenance("nm-second").await;
    let node = env.node("node-0").await;
    assert_eq!(
        node["spec"]["unschedulable"], true,
        "the first maintenance still holds the node"
    );
    assert!(taint_keys(&node).contains(&"medik8s.io/drain".to_string()));
    assert_eq!(env.lease_holder("node-0").await, "node-maintenance");
    assert_eq!(env.phase("nm-first").await, Some(Phase::Succeeded));
    env.stop_cleanly().await;
}

async fn foreign_taints_and_labels_survive_maintenance_and_its_end(backend: Backend) {
    let foreign_taint =
        json!({"key": "example.com/gpu-broken", "value": "true", "effect": "NoExecute"});
    let mut env = TestEnv::on(backend)
        .nodes(1, 2)
        .patched_node(
            "node-0",
            json!({
                "metadata": {"labels": {"team": "storage"}},
                "spec": {"taints": [foreign_taint]}
            }),
        )
        .start_maintaining("nm-0", "node-0")
        .await;
    let during = env.node("node-0").await;
    assert!(taint_keys(&during).contains(&"example.com/gpu-broken".to_string()));
    assert_eq!(taint_keys(&during).len(), 3, "{:?}", taint_keys(&during));

    env.end_maintenance("nm-0").await;
    let after = env.node("node-0").await;
    assert_eq!(
        taint_keys(&after),
        vec!["example.com/gpu-broken".to_string()]
    );
    assert_eq!(after["metadata"]["labels"]["team"], "storage");
    env.stop_cleanly().await;
}

async fn an_uncordoned_node_is_put_back_within_seconds(backend: Backend) {
    let mut env = TestEnv::on(backend)
        .nodes(1, 2)
        .start_maintaining("nm-0", "node-0")
        .await;

    // Someone uncordons, untaints and unlabels the node by hand.
    let started = Instant::now();
    env.patch_node(
        "node-0",
        json!({
            "metadata": {"labels": {"remediation.medik8s.io/exclude-from-remediation": null}},
            "spec": {"unschedulable": null, "taints": null}
        }),
    )
    .await;
    eventually(
        "nmo to repair the node",
        Duration::from_secs(10),
        async || {
            let node = env.node("node-0").await;
            node["spec"]["unschedulable"] == true
                && taint_keys(&node).len() == 2
                && node["metadata"]["labels"]["remediation.medik8s.io/exclude-from-remediation"]
                    == "true"
        },
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "repair took {:?}",
        started.elapsed()
    );
    env.stop_cleanly().await;
}

both_backends!(
    a_missing_node_fails_the_maintenance_with_a_reason,
    a_second_maintenance_for_a_node_fails_and_deleting_it_undoes_nothing,
    foreign_taints_and_labels_survive_maintenance_and_its_end,
    an_uncordoned_node_is_put_back_within_seconds,
);
