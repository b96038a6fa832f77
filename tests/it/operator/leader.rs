//! Leader election: one replica works, a standby takes over when the leader's lease lapses.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use nmo::operator::OperatorOptions;

use crate::support::{
    Backend, OPERATOR_NAMESPACE, Operator, Phase, TestEnv, both_backends, eventually, taint_keys,
    test_options,
};

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

/// A leader (this environment's operator) and a standby on `backend`; returns the
/// environment, the leader's identity and the standby.
async fn a_leader_and_a_standby(
    backend: Backend,
) -> (TestEnv, Option<String>, crate::support::Operator) {
    let env = TestEnv::on(backend)
        .nodes(2, 3)
        .operator_options(elected())
        .start()
        .await;
    eventually("a leader", Duration::from_secs(10), async || {
        leader(&env).await.is_some()
    })
    .await;
    let first_leader = leader(&env).await;
    let standby = env.start_another_operator(elected());
    (env, first_leader, standby)
}

async fn a_standby_takes_over_when_the_leader_dies(backend: Backend) {
    let (mut env, first_leader, standby) = a_leader_and_a_standby(backend).await;

    env.maintain("nm-0", "node-0").await;
    // The standby keeps its hands off: the leader stays the leader.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(leader(&env).await, first_leader);

    env.kill_operator().await;
    env.maintain("nm-1", "node-1").await;
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

/// Holds the leader's next `verb` of `resource` (`subresource`) for `late_by`, delivered
/// whatever becomes of the leader; creates `nm-0` for `node-0`; kills the leader as soon as
/// that write is on its way; returns when it was sent.
async fn kill_the_leader_with_a_write_on_its_way(
    env: &mut TestEnv,
    resource: &str,
    subresource: &str,
    late_by: Duration,
) -> std::time::Instant {
    env.sim().faults().add(
        nmo_sim::FaultRule::on(Some("patch"), Some(resource))
            .subresource(subresource)
            .delivered_late(late_by, 1.0)
            .times(1),
    );
    let writes = nmo_sim::Query::all()
        .verb("patch")
        .resource(resource)
        .subresource(subresource);
    env.create_maintenance("nm-0", "node-0").await;
    eventually(
        "the leader's write on its way",
        Duration::from_secs(10),
        async || env.sim().requests(&writes) >= 1,
    )
    .await;
    let sent = std::time::Instant::now();
    env.kill_operator().await;
    eventually(
        "the standby to take over and drain node-0",
        late_by,
        async || env.phase("nm-0").await == Some(Phase::Succeeded),
    )
    .await;
    sent
}

/// A status write of a deposed leader that arrives after its successor's never lands: the
/// leader's first status write is held by the API server's network for 10 s (the simulator
/// delivers it however the client fares: bytes handed to the kernel are delivered after a
/// network delay or a stop of the process), the leader is killed meanwhile, and the standby
/// takes over, drains the node and writes `Succeeded`. When the old write finally arrives it
/// must be refused (it is conditional on the status its writer last saw), so the status stays
/// `Succeeded` instead of going back to the old leader's `Running`. Simulator only: it needs
/// fault injection (a request delivered late).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_status_write_of_a_deposed_leader_does_not_land() {
    let late_by = Duration::from_secs(10);
    let (mut env, first_leader, standby) = a_leader_and_a_standby(Backend::Sim).await;
    let sent =
        kill_the_leader_with_a_write_on_its_way(&mut env, "nodemaintenances", "status", late_by)
            .await;
    assert_ne!(leader(&env).await, first_leader, "leadership moved");
    // The old leader's write arrives now; give it time to land (or be refused).
    tokio::time::sleep((late_by + Duration::from_secs(2)).saturating_sub(sent.elapsed())).await;
    let status = env.status("nm-0").await;
    assert_eq!(
        status["phase"], "Succeeded",
        "the deposed leader's late write landed: {status}"
    );
    assert_eq!(status["drainProgress"], 100, "{status}");
    standby.stop().await.expect("clean stop");
}

/// A node patch of a deposed leader that arrives after its successor undid the maintenance
/// never lands: the leader's cordon of node-0 is held by the network for 10 s (delivered
/// however the client fares), the leader is killed meanwhile, the standby takes over, drains,
/// and the NodeMaintenance is deleted and undone. The old cordon, computed from the node
/// before any of this (no taints), would find the taints as it tested them; it must still be
/// refused, because the node changed since it was read, so no node is left cordoned for a
/// NodeMaintenance that no longer exists. Simulator only: a request delivered late is fault
/// injection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_node_patch_of_a_deposed_leader_does_not_land() {
    let late_by = Duration::from_secs(10);
    let (mut env, _, standby) = a_leader_and_a_standby(Backend::Sim).await;
    let sent = kill_the_leader_with_a_write_on_its_way(&mut env, "nodes", "", late_by).await;
    env.end_maintenance("nm-0").await;
    assert!(
        sent.elapsed() < late_by,
        "the undo finished before the old cordon arrived"
    );
    tokio::time::sleep((late_by + Duration::from_secs(2)).saturating_sub(sent.elapsed())).await;
    let node = env.node("node-0").await;
    assert_ne!(
        node["spec"]["unschedulable"], true,
        "the deposed leader's late cordon landed: {node}"
    );
    assert!(taint_keys(&node).is_empty(), "{node}");
    assert!(
        node["metadata"]["annotations"][nmo_actors::model::RECORD_ANNOTATION].is_null(),
        "{node}"
    );
    standby.stop().await.expect("clean stop");
}

/// Waits for `replica` to stop by itself, within seconds rather than retrying for ever, and
/// returns the error it stopped with (`expected`: why there must be one).
async fn stops_with_error(replica: Operator, expected: &str) -> String {
    let outcome = tokio::time::timeout(Duration::from_secs(10), replica.wait())
        .await
        .expect("nmo stops within seconds instead of retrying for ever");
    outcome.expect_err(expected).to_string()
}

/// nmo run outside the cluster with a kubeconfig whose namespace is not nmo's: nmo may not use
/// leases there. It stops at once with an error naming the namespace (its start-up rights check
/// says so; had that passed, the election's first refused call would), rather than retrying
/// every retry period for ever. With `--leader-election-namespace` naming nmo's namespace, the
/// same replica leads.
async fn an_election_namespace_nmo_may_not_use_stops_it_with_a_clear_error(backend: Backend) {
    let env = TestEnv::on(backend)
        .nodes(1, 1)
        .deployed_rbac()
        .namespace(OPERATOR_NAMESPACE)
        .start_idle()
        .await;
    let mut elsewhere = env.operator_config();
    elsewhere.default_namespace = "default".into();
    let replica = |options: OperatorOptions| {
        let config = elsewhere.clone();
        Operator::start(
            move || kube::Client::try_from(config).expect("a client"),
            options,
        )
    };
    let error = stops_with_error(replica(elected()), "no leader election without the lease").await;
    for part in ["namespace default", "leases"] {
        assert!(error.contains(part), "{part} in: {error}");
    }

    let flagged = replica(OperatorOptions {
        leader_election_namespace: Some(env.operator_namespace().to_string()),
        ..elected()
    });
    eventually(
        "the flagged replica to lead",
        Duration::from_secs(10),
        async || leader(&env).await.is_some(),
    )
    .await;
    flagged.stop().await.expect("clean stop");
}

both_backends!(an_election_namespace_nmo_may_not_use_stops_it_with_a_clear_error);

/// `--leader-election-namespace` naming a namespace that does not exist, with every right (an
/// admin's kubeconfig, so the start-up rights check passes): the API server refuses the lease
/// (404), and nmo stops at once saying which namespace and which flag, rather than retrying
/// every retry period for ever.
async fn an_election_namespace_that_does_not_exist_stops_nmo_with_a_clear_error(backend: Backend) {
    let env = TestEnv::on(backend).nodes(1, 1).start_idle().await;
    let files = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a directory");
    let kubeconfig = files.path().join("admin");
    env.write_admin_kubeconfig(&kubeconfig);
    let config = nmo::api_client::cluster_config(Some(&kubeconfig))
        .await
        .expect("the admin's configuration");
    let missing = env.ns("no-such-namespace");
    let refused = Operator::start(
        move || kube::Client::try_from(config).expect("a client"),
        OperatorOptions {
            leader_election_namespace: Some(missing.clone()),
            ..elected()
        },
    );
    let error = stops_with_error(refused, "no election in a missing namespace").await;
    for part in [
        format!("namespace {missing}"),
        "--leader-election-namespace".to_string(),
        "(404)".to_string(),
    ] {
        assert!(error.contains(&part), "{part} in: {error}");
    }
}

both_backends!(an_election_namespace_that_does_not_exist_stops_nmo_with_a_clear_error);
