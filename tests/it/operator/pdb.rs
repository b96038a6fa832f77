//! Drains held up by PodDisruptionBudgets: the status says why, a blocked node holds up no
//! other, and deleting a blocked maintenance undoes it at once.

use std::time::{Duration, Instant};

use super::{cluster_with_a_blocked_pod, node_0_blocked};
use crate::support::{Backend, Phase, both_backends, elements, eventually, taint_keys};

async fn a_blocked_drain_names_the_pdb_then_finishes_when_it_is_relaxed(backend: Backend) {
    let mut env = cluster_with_a_blocked_pod(backend)
        .start_with_maintenance("nm-0", "node-0")
        .await;

    eventually(
        "only the protected pod to be left, blocked by its budget",
        Duration::from_secs(20),
        async || {
            let status = env.status("nm-0").await;
            status["pendingPods"].as_array().map(Vec::len) == Some(1)
                && status["lastError"]
                    .as_str()
                    .is_some_and(|e| e.contains("db-budget"))
        },
    )
    .await;
    let blocked = env.status("nm-0").await;
    assert_eq!(blocked["phase"], "Running");
    assert_eq!(blocked["pendingPods"], serde_json::json!(["db-0"]));
    let reasons = elements(&blocked["pendingPodsReasons"]);
    assert!(
        reasons
            .iter()
            .any(|r| r["name"] == "db-0" && r["pdb"] == "db-budget"),
        "{blocked}"
    );
    assert!(
        env.pod_exists("precious", "db-0").await,
        "a protected pod is never deleted"
    );

    env.relax_pdb("precious", "db-budget", 0).await;
    env.wait_succeeded("nm-0").await;
    let done = env.status("nm-0").await;
    assert!(
        done["lastError"].as_str().unwrap_or_default().is_empty(),
        "lastError is cleared: {done}"
    );
    assert!(!env.pod_exists("precious", "db-0").await);
    env.stop_cleanly().await;
}

async fn a_blocked_maintenance_does_not_delay_another(backend: Backend) {
    let mut env = node_0_blocked(backend).await;

    let started = Instant::now();
    env.maintain("nm-1", "node-1").await;
    // The Go operator's single worker would hold node-1 behind node-0's blocked retries.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "node-1 took {:?}",
        started.elapsed()
    );
    assert_eq!(env.phase("nm-0").await, Some(Phase::Running));
    env.stop_cleanly().await;
}

async fn deleting_a_blocked_maintenance_undoes_it_within_seconds(backend: Backend) {
    let mut env = node_0_blocked(backend).await;

    let started = Instant::now();
    env.end_maintenance("nm-0").await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "undo took {:?}",
        started.elapsed()
    );
    let node = env.node("node-0").await;
    assert_ne!(node["spec"]["unschedulable"], true);
    assert!(!taint_keys(&node).iter().any(|k| k == "medik8s.io/drain"));
    assert!(env.lease("node-0").await.is_none());
    assert!(env.pod_exists("precious", "db-0").await);
    // Nothing re-cordons the node afterwards.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_ne!(env.node("node-0").await["spec"]["unschedulable"], true);
    env.stop_cleanly().await;
}

both_backends!(
    a_blocked_drain_names_the_pdb_then_finishes_when_it_is_relaxed,
    a_blocked_maintenance_does_not_delay_another,
    deleting_a_blocked_maintenance_undoes_it_within_seconds,
);
