//! The node lease shared with the other medik8s operators (Node Health Check holds it while it
//! remediates a node).

use std::time::Duration;

use nmo_sim::Scenario;

use crate::support::{Backend, TestEnv, both_backends, eventually, test_options};

async fn a_valid_foreign_lease_means_hands_off_until_it_is_released(backend: Backend) {
    let mut env = TestEnv::on(backend)
        .scenario(Scenario::plain(2, 3))
        .foreign_lease("node-0", "node-healthcheck", Duration::from_secs(60))
        .start()
        .await;
    let node_before = env.node("node-0").await;
    let pods_before = env.pods_on("node-0").await.len();
    env.create_maintenance("nm-0", "node-0").await;

    eventually(
        "the status to say who holds the lease",
        Duration::from_secs(20),
        async || env.last_error_mentions("nm-0", "node-healthcheck").await,
    )
    .await;
    // Waiting longer than a re-check: still nothing touched.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let nm = env.maintenance("nm-0").await.expect("exists");
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
    let node_now = env.node("node-0").await;
    assert_eq!(
        node_now["spec"], node_before["spec"],
        "the node is untouched"
    );
    assert_eq!(
        node_now["metadata"]["labels"],
        node_before["metadata"]["labels"]
    );
    assert_eq!(
        env.pods_on("node-0").await.len(),
        pods_before,
        "no pod was evicted"
    );
    assert_eq!(
        env.lease("node-0").await.expect("lease")["spec"]["holderIdentity"],
        "node-healthcheck"
    );

    env.delete_lease("node-0").await;
    eventually(
        "the maintenance to proceed",
        Duration::from_secs(30),
        async || env.phase("nm-0").await.as_deref() == Some("Succeeded"),
    )
    .await;
    assert_eq!(
        env.lease("node-0").await.expect("lease")["spec"]["holderIdentity"],
        "node-maintenance"
    );
    env.stop_operator().await.expect("clean stop");
}

async fn an_expired_foreign_lease_is_taken_over(backend: Backend) {
    let mut env = TestEnv::on(backend)
        .scenario(Scenario::plain(2, 3))
        .foreign_lease("node-0", "node-healthcheck", Duration::from_secs(7200))
        .start()
        .await;
    env.create_maintenance("nm-0", "node-0").await;
    eventually(
        "the maintenance to succeed",
        Duration::from_secs(30),
        async || env.phase("nm-0").await.as_deref() == Some("Succeeded"),
    )
    .await;
    let lease = env.lease("node-0").await.expect("lease");
    assert_eq!(lease["spec"]["holderIdentity"], "node-maintenance");
    assert_eq!(
        lease["spec"]["leaseTransitions"], 3,
        "one more transition than the foreign holder's 2"
    );
    env.stop_operator().await.expect("clean stop");
}

async fn the_lease_is_renewed_by_a_timer_while_the_maintenance_lasts(backend: Backend) {
    let options = nmo::operator::OperatorOptions {
        lease_renew_interval: Some(Duration::from_secs(1)),
        ..test_options()
    };
    let mut env = TestEnv::on(backend)
        .scenario(Scenario::plain(2, 2).pdb(None))
        .operator_options(options)
        .start()
        .await;
    env.create_maintenance("nm-0", "node-0").await;
    eventually(
        "the maintenance to succeed",
        Duration::from_secs(20),
        async || env.phase("nm-0").await.as_deref() == Some("Succeeded"),
    )
    .await;
    let renew_time = async || {
        env.lease("node-0")
            .await
            .map(|lease| lease["spec"]["renewTime"].clone())
    };
    let first = renew_time().await;
    // Nothing else happens to this maintenance: only the timer can move renewTime.
    eventually("a renewal", Duration::from_secs(5), async || {
        renew_time().await != first
    })
    .await;
    let lease = env.lease("node-0").await.expect("lease");
    assert_eq!(lease["spec"]["holderIdentity"], "node-maintenance");
    assert_eq!(
        lease["spec"]["leaseTransitions"].as_i64().unwrap_or(0),
        0,
        "a renewal is no transition"
    );
    env.stop_operator().await.expect("clean stop");
}

both_backends!(
    a_valid_foreign_lease_means_hands_off_until_it_is_released,
    an_expired_foreign_lease_is_taken_over,
    the_lease_is_renewed_by_a_timer_while_the_maintenance_lasts,
);
