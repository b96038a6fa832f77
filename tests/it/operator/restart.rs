//! Crash safety: an operator killed mid-drain leaves a state the next one finishes from.

use std::time::Duration;

use nmo_sim::Scenario;

use super::cluster::{self, taint_keys};
use super::harness::{Operator, test_options};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_operator_finishes_what_a_killed_one_started() {
    let sim = cluster::start(Scenario::plain(2, 4).pdb(None)).await;
    let client = cluster::test_client(&sim);
    cluster::create_namespace(&client, "precious").await;
    cluster::create_pod(&client, "precious", "db-0", "node-0", "db").await;
    cluster::create_pdb(&client, "precious", "db-budget", "db", 1).await;

    let first = Operator::start(cluster::operator_client(&sim), test_options());
    cluster::create_maintenance(&client, "nm-0", "node-0").await;
    // The drain is under way and blocked.
    cluster::wait_until_blocked_by(&sim, "nm-0", "db-budget").await;
    first.kill().await;
    let progress_before =
        cluster::maintenance(&sim, "nm-0").expect("exists")["status"]["drainProgress"].clone();

    // The budget is relaxed while no operator runs; the next one picks the drain up.
    cluster::relax_pdb(&client, "precious", "db-budget", 0).await;
    let second = Operator::start(cluster::operator_client(&sim), test_options());
    cluster::wait_for(
        "the new operator to finish the drain",
        Duration::from_secs(30),
        || cluster::phase(&sim, "nm-0").as_deref() == Some("Succeeded"),
    )
    .await;
    let status = cluster::maintenance(&sim, "nm-0").expect("exists")["status"].clone();
    assert!(
        status["drainProgress"].as_i64() >= progress_before.as_i64(),
        "progress never goes back"
    );
    assert_eq!(status["drainProgress"], 100);
    assert!(!cluster::pod_exists(&sim, "precious", "db-0"));
    assert_eq!(cluster::node(&sim, "node-0")["spec"]["unschedulable"], true);

    // And a kill during the undo is finished by the next operator too.
    cluster::delete_maintenance(&client, "nm-0").await;
    second.kill().await;
    let third = Operator::start(cluster::operator_client(&sim), test_options());
    cluster::wait_until_gone(&sim, "nm-0").await;
    let node = cluster::node(&sim, "node-0");
    assert_ne!(node["spec"]["unschedulable"], true);
    assert!(taint_keys(&node).is_empty(), "{:?}", taint_keys(&node));
    assert!(cluster::lease(&sim, "node-0").is_none());
    third.stop().await.expect("clean stop");
    sim.shutdown().await;
}
