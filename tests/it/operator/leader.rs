//! Leader election: one replica works, a standby takes over when the leader's lease lapses.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use nmo::operator::OperatorOptions;
use nmo_sim::Scenario;

use crate::support::{Backend, TestEnv, both_backends, eventually, test_options};

fn elected() -> OperatorOptions {
    OperatorOptions {
        leader_elect: true,
        leader_elect_lease_duration: Duration::from_secs(3),
        leader_elect_renew_deadline: Duration::from_secs(2),
        leader_elect_retry_period: Duration::from_millis(300),
        ..test_options()
    }
}

async fn leader_lease(env: &TestEnv) -> Option<serde_json::Value> {
    env.get_json::<Lease>(
        Some(env.operator_namespace()),
        nmo::leader::LEADER_ELECTION_ID,
    )
    .await
}

async fn leader(env: &TestEnv) -> Option<String> {
    leader_lease(env)
        .await
        .and_then(|lease| lease["spec"]["holderIdentity"].as_str().map(str::to_string))
        .filter(|holder| !holder.is_empty())
}

async fn a_standby_takes_over_when_the_leader_dies(backend: Backend) {
    let mut env = TestEnv::on(backend)
        .scenario(Scenario::plain(2, 3).pdb(None))
        .operator_options(elected())
        .start()
        .await;
    eventually("a leader", Duration::from_secs(10), async || {
        leader(&env).await.is_some()
    })
    .await;
    let first_leader = leader(&env).await;
    let standby = env.start_another_operator(elected());

    env.create_maintenance("nm-0", "node-0").await;
    eventually(
        "the leader to drain node-0",
        Duration::from_secs(20),
        async || env.phase("nm-0").await.as_deref() == Some("Succeeded"),
    )
    .await;
    // The standby keeps its hands off: the leader stays the leader.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(leader(&env).await, first_leader);

    env.kill_operator().await;
    env.create_maintenance("nm-1", "node-1").await;
    eventually(
        "the standby to take over and drain node-1",
        Duration::from_secs(20),
        async || env.phase("nm-1").await.as_deref() == Some("Succeeded"),
    )
    .await;
    assert_ne!(leader(&env).await, first_leader, "leadership moved");
    let lease = leader_lease(&env).await.expect("the leader lease");
    assert_eq!(lease["spec"]["leaseTransitions"], 1);

    // A graceful stop hands the lease back at once.
    standby.stop().await.expect("clean stop");
    assert_eq!(
        leader(&env).await,
        None,
        "the lease is released on shutdown"
    );
}

both_backends!(a_standby_takes_over_when_the_leader_dies,);
