//! The node lease shared with the other medik8s operators (Node Health Check holds it while it
//! remediates a node).

use std::time::Duration;

use nmo_sim::Scenario;

use super::cluster;
use super::harness::{Operator, test_options};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_foreign_lease_means_hands_off_until_it_is_released() {
    let sim = cluster::start(Scenario::plain(2, 3)).await;
    let client = cluster::test_client(&sim);
    cluster::create_foreign_lease(
        &client,
        "node-0",
        "node-healthcheck",
        Duration::from_secs(60),
    )
    .await;
    let node_before = cluster::node(&sim, "node-0");
    let pods_before = cluster::pods_on(&sim, "node-0").len();
    let operator = Operator::start(cluster::operator_client(&sim), test_options());
    cluster::create_maintenance(&client, "nm-0", "node-0").await;

    cluster::wait_for(
        "the status to say who holds the lease",
        Duration::from_secs(20),
        || cluster::last_error_mentions(&sim, "nm-0", "node-healthcheck"),
    )
    .await;
    // Waiting longer than a re-check: still nothing touched.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let nm = cluster::maintenance(&sim, "nm-0").expect("exists");
    let conditions = nm["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        conditions
            .iter()
            .any(|c| c["type"] == "LeaseAcquired" && c["status"] == "False"),
        "waiting for the lease is visible: {conditions:?}"
    );
    assert_eq!(nm["status"]["errorOnLeaseCount"].as_i64().unwrap_or(0), 0);
    let node_now = cluster::node(&sim, "node-0");
    assert_eq!(
        node_now["spec"], node_before["spec"],
        "the node is untouched"
    );
    assert_eq!(
        node_now["metadata"]["labels"],
        node_before["metadata"]["labels"]
    );
    assert_eq!(
        cluster::pods_on(&sim, "node-0").len(),
        pods_before,
        "no pod was evicted"
    );
    assert_eq!(
        cluster::lease(&sim, "node-0").expect("lease")["spec"]["holderIdentity"],
        "node-healthcheck"
    );

    cluster::delete_lease(&client, "node-0").await;
    cluster::wait_for(
        "the maintenance to proceed",
        Duration::from_secs(30),
        || cluster::phase(&sim, "nm-0").as_deref() == Some("Succeeded"),
    )
    .await;
    assert_eq!(
        cluster::lease(&sim, "node-0").expect("lease")["spec"]["holderIdentity"],
        "node-maintenance"
    );
    operator.stop().await.expect("clean stop");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_foreign_lease_is_taken_over() {
    let sim = cluster::start(Scenario::plain(2, 3)).await;
    let client = cluster::test_client(&sim);
    cluster::create_foreign_lease(
        &client,
        "node-0",
        "node-healthcheck",
        Duration::from_secs(7200),
    )
    .await;
    let operator = Operator::start(cluster::operator_client(&sim), test_options());
    cluster::create_maintenance(&client, "nm-0", "node-0").await;
    cluster::wait_for(
        "the maintenance to succeed",
        Duration::from_secs(30),
        || cluster::phase(&sim, "nm-0").as_deref() == Some("Succeeded"),
    )
    .await;
    let lease = cluster::lease(&sim, "node-0").expect("lease");
    assert_eq!(lease["spec"]["holderIdentity"], "node-maintenance");
    assert_eq!(
        lease["spec"]["leaseTransitions"], 3,
        "one more transition than the foreign holder's 2"
    );
    operator.stop().await.expect("clean stop");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_is_renewed_by_a_timer_while_the_maintenance_lasts() {
    let sim = cluster::start(Scenario::plain(2, 2).pdb(None)).await;
    let client = cluster::test_client(&sim);
    let options = nmo::operator::OperatorOptions {
        lease_renew_interval: Some(Duration::from_secs(1)),
        ..test_options()
    };
    let operator = Operator::start(cluster::operator_client(&sim), options);
    cluster::create_maintenance(&client, "nm-0", "node-0").await;
    cluster::wait_for(
        "the maintenance to succeed",
        Duration::from_secs(20),
        || cluster::phase(&sim, "nm-0").as_deref() == Some("Succeeded"),
    )
    .await;
    let renew_time = |sim: &nmo_sim::SimHandle| {
        cluster::lease(sim, "node-0").map(|lease| lease["spec"]["renewTime"].clone())
    };
    let first = renew_time(&sim);
    // Nothing else happens to this maintenance: only the timer can move renewTime.
    cluster::wait_for("a renewal", Duration::from_secs(5), || {
        renew_time(&sim) != first
    })
    .await;
    let lease = cluster::lease(&sim, "node-0").expect("lease");
    assert_eq!(lease["spec"]["holderIdentity"], "node-maintenance");
    assert_eq!(
        lease["spec"]["leaseTransitions"].as_i64().unwrap_or(0),
        0,
        "a renewal is no transition"
    );
    operator.stop().await.expect("clean stop");
    sim.shutdown().await;
}
