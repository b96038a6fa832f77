//! Leader election: one replica works, a standby takes over when the leader's lease lapses.

use std::time::Duration;

use nmo::operator::OperatorOptions;
use nmo_sim::Scenario;

use super::cluster;
use super::harness::{Operator, test_options};

fn elected() -> OperatorOptions {
    OperatorOptions {
        leader_elect: true,
        leader_elect_lease_duration: Duration::from_secs(3),
        leader_elect_renew_deadline: Duration::from_secs(2),
        leader_elect_retry_period: Duration::from_millis(300),
        ..test_options()
    }
}

fn leader(sim: &nmo_sim::SimHandle) -> Option<String> {
    sim.get_json(
        "coordination.k8s.io",
        "leases",
        "default",
        nmo::leader::LEADER_ELECTION_ID,
    )
    .and_then(|lease| lease["spec"]["holderIdentity"].as_str().map(str::to_string))
    .filter(|holder| !holder.is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_when_the_leader_dies() {
    let sim = cluster::start(Scenario::plain(2, 3).pdb(None)).await;
    let client = cluster::test_client(&sim);
    let first = Operator::start(cluster::operator_client(&sim), elected());
    cluster::wait_for("a leader", Duration::from_secs(10), || {
        leader(&sim).is_some()
    })
    .await;
    let first_leader = leader(&sim);
    let standby = Operator::start(cluster::operator_client(&sim), elected());

    cluster::create_maintenance(&client, "nm-0", "node-0").await;
    cluster::wait_for(
        "the leader to drain node-0",
        Duration::from_secs(20),
        || cluster::phase(&sim, "nm-0").as_deref() == Some("Succeeded"),
    )
    .await;
    // The standby keeps its hands off: the leader stays the leader.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(leader(&sim), first_leader);

    first.kill().await;
    cluster::create_maintenance(&client, "nm-1", "node-1").await;
    cluster::wait_for(
        "the standby to take over and drain node-1",
        Duration::from_secs(20),
        || cluster::phase(&sim, "nm-1").as_deref() == Some("Succeeded"),
    )
    .await;
    assert_ne!(leader(&sim), first_leader, "leadership moved");
    let lease = sim
        .get_json(
            "coordination.k8s.io",
            "leases",
            "default",
            nmo::leader::LEADER_ELECTION_ID,
        )
        .expect("the leader lease");
    assert_eq!(lease["spec"]["leaseTransitions"], 1);

    // A graceful stop hands the lease back at once.
    standby.stop().await.expect("clean stop");
    assert_eq!(leader(&sim), None, "the lease is released on shutdown");
    sim.shutdown().await;
}
