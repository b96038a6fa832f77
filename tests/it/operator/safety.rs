//! What nmo must never do: touch a node that is not its to touch, lose someone else's taints,
//! or leave a node half restored.

use std::time::{Duration, Instant};

use nmo_sim::Scenario;
use serde_json::json;

use super::cluster::{self, taint_keys};
use super::harness::{Operator, test_options};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_node_fails_the_maintenance_with_a_reason() {
    let sim = cluster::start(Scenario::plain(1, 2).pdb(None)).await;
    let client = cluster::test_client(&sim);
    let operator = Operator::start(cluster::operator_client(&sim), test_options());
    cluster::create_maintenance(&client, "nm-ghost", "no-such-node").await;
    cluster::wait_for_phase(&sim, "nm-ghost", "Failed").await;
    let nm = cluster::maintenance(&sim, "nm-ghost").expect("exists");
    let error = nm["status"]["lastError"].as_str().unwrap_or_default();
    assert!(
        error.contains("no-such-node"),
        "lastError names the node: {error}"
    );
    // Events are sent alongside the status, not before it.
    cluster::wait_for(
        "the FailedMaintenance event",
        Duration::from_secs(5),
        || cluster::event_reasons(&sim, "nm-ghost").contains(&"FailedMaintenance".to_string()),
    )
    .await;
    assert!(
        cluster::lease(&sim, "no-such-node").is_none(),
        "no lease for a node that does not exist"
    );
    operator.stop().await.expect("clean stop");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_maintenance_for_a_node_fails_and_deleting_it_undoes_nothing() {
    let sim = cluster::start(Scenario::plain(2, 3)).await;
    let client = cluster::test_client(&sim);
    let operator = Operator::start(cluster::operator_client(&sim), test_options());
    cluster::create_maintenance(&client, "nm-first", "node-0").await;
    cluster::wait_for_phase(&sim, "nm-first", "Succeeded").await;
    cluster::create_maintenance(&client, "nm-second", "node-0").await;
    cluster::wait_for_phase(&sim, "nm-second", "Failed").await;
    let second = cluster::maintenance(&sim, "nm-second").expect("exists");
    let error = second["status"]["lastError"].as_str().unwrap_or_default();
    assert!(
        error.contains("nm-first"),
        "the reason names the active maintenance: {error}"
    );

    cluster::delete_maintenance(&client, "nm-second").await;
    cluster::wait_until_gone(&sim, "nm-second").await;
    let node = cluster::node(&sim, "node-0");
    assert_eq!(
        node["spec"]["unschedulable"], true,
        "the first maintenance still holds the node"
    );
    assert!(taint_keys(&node).contains(&"medik8s.io/drain".to_string()));
    assert_eq!(
        cluster::lease(&sim, "node-0").expect("lease")["spec"]["holderIdentity"],
        "node-maintenance"
    );
    assert_eq!(
        cluster::phase(&sim, "nm-first").as_deref(),
        Some("Succeeded")
    );
    operator.stop().await.expect("clean stop");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_taints_and_labels_survive_maintenance_and_its_end() {
    let sim = cluster::start(Scenario::plain(1, 2).pdb(None)).await;
    let client = cluster::test_client(&sim);
    let foreign_taint =
        json!({"key": "example.com/gpu-broken", "value": "true", "effect": "NoExecute"});
    cluster::patch_node(
        &client,
        "node-0",
        json!({
            "metadata": {"labels": {"team": "storage"}},
            "spec": {"taints": [foreign_taint]}
        }),
    )
    .await;
    let operator = Operator::start(cluster::operator_client(&sim), test_options());
    cluster::create_maintenance(&client, "nm-0", "node-0").await;
    cluster::wait_for(
        "the maintenance to succeed",
        Duration::from_secs(20),
        || cluster::phase(&sim, "nm-0").as_deref() == Some("Succeeded"),
    )
    .await;
    let during = cluster::node(&sim, "node-0");
    assert!(taint_keys(&during).contains(&"example.com/gpu-broken".to_string()));
    assert_eq!(taint_keys(&during).len(), 3, "{:?}", taint_keys(&during));

    cluster::delete_maintenance(&client, "nm-0").await;
    cluster::wait_for(
        "the maintenance to be gone",
        Duration::from_secs(20),
        || cluster::maintenance(&sim, "nm-0").is_none(),
    )
    .await;
    let after = cluster::node(&sim, "node-0");
    assert_eq!(
        taint_keys(&after),
        vec!["example.com/gpu-broken".to_string()]
    );
    assert_eq!(after["metadata"]["labels"]["team"], "storage");
    operator.stop().await.expect("clean stop");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncordoned_node_is_put_back_within_seconds() {
    let sim = cluster::start(Scenario::plain(1, 2).pdb(None)).await;
    let client = cluster::test_client(&sim);
    let operator = Operator::start(cluster::operator_client(&sim), test_options());
    cluster::create_maintenance(&client, "nm-0", "node-0").await;
    cluster::wait_for(
        "the maintenance to succeed",
        Duration::from_secs(20),
        || cluster::phase(&sim, "nm-0").as_deref() == Some("Succeeded"),
    )
    .await;

    // Someone uncordons, untaints and unlabels the node by hand.
    let started = Instant::now();
    cluster::patch_node(
        &client,
        "node-0",
        json!({
            "metadata": {"labels": {"remediation.medik8s.io/exclude-from-remediation": null}},
            "spec": {"unschedulable": null, "taints": null}
        }),
    )
    .await;
    cluster::wait_for("nmo to repair the node", Duration::from_secs(10), || {
        let node = cluster::node(&sim, "node-0");
        node["spec"]["unschedulable"] == true
            && taint_keys(&node).len() == 2
            && node["metadata"]["labels"]["remediation.medik8s.io/exclude-from-remediation"]
                == "true"
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "repair took {:?}",
        started.elapsed()
    );
    operator.stop().await.expect("clean stop");
    sim.shutdown().await;
}
