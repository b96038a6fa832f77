//! Drains held up by PodDisruptionBudgets: the status says why, a blocked node holds up no
//! other, and deleting a blocked maintenance undoes it at once.

use std::time::{Duration, Instant};

use nmo_sim::Scenario;

use super::cluster::{self, taint_keys};
use super::harness::{Operator, test_options};

/// Two nodes without PDBs of their own, plus a pod on node-0 that a PDB protects completely.
async fn cluster_with_a_blocked_pod() -> (nmo_sim::SimHandle, kube::Client) {
    let sim = cluster::start(Scenario::plain(2, 4).pdb(None)).await;
    let client = cluster::test_client(&sim);
    cluster::create_namespace(&client, "precious").await;
    cluster::create_pod(&client, "precious", "db-0", "node-0", "db").await;
    cluster::create_pdb(&client, "precious", "db-budget", "db", 1).await;
    (sim, client)
}

fn status(sim: &nmo_sim::SimHandle, name: &str) -> serde_json::Value {
    cluster::maintenance(sim, name)
        .map(|nm| nm["status"].clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_drain_names_the_budget_then_finishes_when_it_is_relaxed() {
    let (sim, client) = cluster_with_a_blocked_pod().await;
    let operator = Operator::start(cluster::operator_client(&sim), test_options());
    cluster::create_maintenance(&client, "nm-0", "node-0").await;

    cluster::wait_for(
        "only the protected pod to be left, blocked by its budget",
        Duration::from_secs(20),
        || {
            let status = status(&sim, "nm-0");
            status["pendingPods"].as_array().map(Vec::len) == Some(1)
                && status["lastError"]
                    .as_str()
                    .is_some_and(|e| e.contains("db-budget"))
        },
    )
    .await;
    let blocked = status(&sim, "nm-0");
    assert_eq!(blocked["phase"], "Running");
    assert_eq!(blocked["pendingPods"], serde_json::json!(["db-0"]));
    let reasons = blocked["pendingPodsReasons"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        reasons
            .iter()
            .any(|r| r["name"] == "db-0" && r["pdb"] == "db-budget"),
        "{blocked}"
    );
    assert!(
        cluster::pod_exists(&sim, "precious", "db-0"),
        "a protected pod is never deleted"
    );

    cluster::relax_pdb(&client, "precious", "db-budget", 0).await;
    cluster::wait_for_phase(&sim, "nm-0", "Succeeded").await;
    let done = status(&sim, "nm-0");
    assert!(
        done["lastError"].as_str().unwrap_or_default().is_empty(),
        "lastError is cleared: {done}"
    );
    assert!(!cluster::pod_exists(&sim, "precious", "db-0"));
    operator.stop().await.expect("clean stop");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_maintenance_does_not_delay_another() {
    let (sim, client) = cluster_with_a_blocked_pod().await;
    let operator = Operator::start(cluster::operator_client(&sim), test_options());
    cluster::create_maintenance(&client, "nm-0", "node-0").await;
    cluster::wait_until_blocked_by(&sim, "nm-0", "db-budget").await;

    let started = Instant::now();
    cluster::create_maintenance(&client, "nm-1", "node-1").await;
    cluster::wait_for_phase(&sim, "nm-1", "Succeeded").await;
    // The Go operator's single worker would hold node-1 behind node-0's blocked retries.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "node-1 took {:?}",
        started.elapsed()
    );
    assert_eq!(cluster::phase(&sim, "nm-0").as_deref(), Some("Running"));
    operator.stop().await.expect("clean stop");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_blocked_maintenance_undoes_it_within_seconds() {
    let (sim, client) = cluster_with_a_blocked_pod().await;
    let operator = Operator::start(cluster::operator_client(&sim), test_options());
    cluster::create_maintenance(&client, "nm-0", "node-0").await;
    cluster::wait_until_blocked_by(&sim, "nm-0", "db-budget").await;

    let started = Instant::now();
    cluster::delete_maintenance(&client, "nm-0").await;
    cluster::wait_for(
        "the maintenance to be gone",
        Duration::from_secs(20),
        || cluster::maintenance(&sim, "nm-0").is_none(),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "undo took {:?}",
        started.elapsed()
    );
    let node = cluster::node(&sim, "node-0");
    assert_ne!(node["spec"]["unschedulable"], true);
    assert!(!taint_keys(&node).iter().any(|k| k == "medik8s.io/drain"));
    assert!(cluster::lease(&sim, "node-0").is_none());
    assert!(cluster::pod_exists(&sim, "precious", "db-0"));
    // Nothing re-cordons the node afterwards.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_ne!(cluster::node(&sim, "node-0")["spec"]["unschedulable"], true);
    operator.stop().await.expect("clean stop");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_under_two_budgets_is_reported_as_such() {
    let sim = cluster::start(Scenario::plain(2, 2).pdb(None)).await;
    let client = cluster::test_client(&sim);
    cluster::create_namespace(&client, "precious").await;
    cluster::create_pod(&client, "precious", "db-0", "node-0", "db").await;
    cluster::create_pdb(&client, "precious", "db-budget", "db", 0).await;
    cluster::create_pdb(&client, "precious", "db-budget-too", "db", 0).await;
    let operator = Operator::start(cluster::operator_client(&sim), test_options());
    cluster::create_maintenance(&client, "nm-0", "node-0").await;
    cluster::wait_for(
        "the status to say why db-0 cannot go",
        Duration::from_secs(20),
        || {
            status(&sim, "nm-0")["lastError"]
                .as_str()
                .is_some_and(|e| e.contains("more than one PodDisruptionBudget"))
        },
    )
    .await;
    assert!(
        cluster::pod_exists(&sim, "precious", "db-0"),
        "the pod is not deleted instead"
    );
    assert_eq!(cluster::phase(&sim, "nm-0").as_deref(), Some("Running"));
    operator.stop().await.expect("clean stop");
    sim.shutdown().await;
}
