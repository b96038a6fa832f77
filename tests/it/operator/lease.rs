//! The node lease shared with the other medik8s operators (Node Health Check holds it while it
//! remediates a node).

use std::time::Duration;

use crate::support::{Backend, Phase, TestEnv, both_backends, elements, eventually, test_options};

/// Creates `nm-0` for `node-0`, whose lease `holder` holds, and waits until its status names
/// the holder, then longer than a re-check of the lease, so that anything nmo would touch has
/// been touched by then.
async fn creates_nm_0_and_waits_behind(env: &TestEnv, holder: &str) {
    env.create_maintenance("nm-0", "node-0").await;
    env.wait_last_error_mentions(
        "the status to say who holds the lease",
        Duration::from_secs(20),
        "nm-0",
        holder,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(6)).await;
}

/// Two nodes with three pods each, node-0's lease held by Node Health Check, renewed
/// `renewed_ago`, and nmo running.
async fn leased_by_node_healthcheck(backend: Backend, renewed_ago: Duration) -> TestEnv {
    TestEnv::on(backend)
        .budgeted_nodes(2, 3)
        .foreign_lease("node-0", "node-healthcheck", renewed_ago)
        .start()
        .await
}

async fn a_valid_foreign_lease_means_hands_off_until_it_is_released(backend: Backend) {
    let mut env = leased_by_node_healthcheck(backend, Duration::from_secs(60)).await;
    let node_before = env.node("node-0").await;
    let pods_before = env.pods_on("node-0").await.len();
    creates_nm_0_and_waits_behind(&env, "node-healthcheck").await;
    let nm = env.maintenance("nm-0").await.expect("exists");
    let conditions = elements(&nm["status"]["conditions"]);
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
    assert_eq!(env.lease_holder("node-0").await, "node-healthcheck");

    env.delete_lease("node-0").await;
    env.wait_succeeded("nm-0").await;
    assert_eq!(env.lease_holder("node-0").await, "node-maintenance");
    env.stop_cleanly().await;
}

async fn an_expired_foreign_lease_is_taken_over(backend: Backend) {
    let mut env = leased_by_node_healthcheck(backend, Duration::from_secs(7200)).await;
    env.maintain("nm-0", "node-0").await;
    let lease = env.lease("node-0").await.expect("lease");
    assert_eq!(lease["spec"]["holderIdentity"], "node-maintenance");
    assert_eq!(
        lease["spec"]["leaseTransitions"], 3,
        "one more transition than the foreign holder's 2"
    );
    env.stop_cleanly().await;
}

async fn the_lease_is_renewed_by_a_timer_while_the_maintenance_lasts(backend: Backend) {
    let options = nmo::operator::OperatorOptions {
        lease_renew_interval: Some(Duration::from_secs(1)),
        ..test_options()
    };
    let mut env = TestEnv::on(backend)
        .nodes(2, 2)
        .operator_options(options)
        .start_maintaining("nm-0", "node-0")
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
    env.stop_cleanly().await;
}

both_backends!(
    a_valid_foreign_lease_means_hands_off_until_it_is_released,
    an_expired_foreign_lease_is_taken_over,
    the_lease_is_renewed_by_a_timer_while_the_maintenance_lasts,
);

/// The takeover, end to end: a drain blocked by a budget over two pods, and the node
/// lease overwritten by `node-healthcheck` with a fresh renewal (as Node Health Check, or an
/// admin forcing a takeover, does). Two seconds later the budget goes, so any eviction from then
/// on would succeed: both pods must still be there when nmo has given up. nmo gives up within
/// seconds (every attempt to take the lease back counts: Failed with `errorOnLeaseCount` 4,
/// naming the new holder, and a Warning event), never says Succeeded, never writes the foreign
/// lease, and gives back only what is its alone (the label and the drain taint; the cordon now
/// serves the holder).
async fn a_lease_taken_mid_drain_stops_the_drain_and_fails_naming_the_holder(backend: Backend) {
    let mut env = TestEnv::on(backend)
        .nodes(1, 0)
        .precious_pods(&["db-0", "db-1"], 2)
        .start_with_maintenance("nm-0", "node-0")
        .await;
    env.wait_blocked_by("nm-0", "db-budget").await;

    let taken = env.take_over_lease("node-0", "node-healthcheck").await;
    let taken_at = std::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    env.patch_json::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(
        Some("precious"),
        "db-budget",
        serde_json::json!({"spec": {"minAvailable": 0}}),
    )
    .await;
    eventually("nm-0 to give up", Duration::from_secs(30), async || {
        env.phase("nm-0").await == Some(Phase::Failed)
    })
    .await;
    let gave_up = taken_at.elapsed();
    // Time for a late eviction to show.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        env.pod_exists("precious", "db-0").await && env.pod_exists("precious", "db-1").await,
        "a pod was evicted after the takeover: {:?}",
        env.pods_on("node-0").await
    );
    let status = env.status("nm-0").await;
    assert_eq!(status["errorOnLeaseCount"], 4, "{status}");
    let error = status["lastError"].as_str().unwrap_or_default();
    assert!(error.contains("node-healthcheck"), "{error}");
    assert!(
        gave_up < Duration::from_secs(20),
        "gave up after {gave_up:?}"
    );
    let reasons = env.event_reasons("nm-0").await;
    assert!(
        !reasons.contains(&"SucceedMaintenance".to_string()),
        "{reasons:?}"
    );
    let failed = env.event_messages("nm-0", "FailedMaintenance").await;
    assert!(
        failed.iter().any(|m| m.contains("node-healthcheck")),
        "{failed:?}"
    );
    eventually(
        "the label to go, the cordon to stay for the holder",
        Duration::from_secs(10),
        async || {
            let node = env.node("node-0").await;
            node["metadata"]["labels"]
                .get("remediation.medik8s.io/exclude-from-remediation")
                .is_none()
                && node["spec"]["unschedulable"] == true
        },
    )
    .await;
    let lease = env.lease("node-0").await.expect("their lease");
    assert_eq!(
        lease["spec"], taken["spec"],
        "the foreign lease was written"
    );
    env.stop_cleanly().await;
}
both_backends!(a_lease_taken_mid_drain_stops_the_drain_and_fails_naming_the_holder);

/// Two nodes with three pods each, node-0's lease held by Node Health Check, renewed `ahead`
/// of this clock (its clock runs ahead).
async fn with_a_lease_renewed_ahead(backend: Backend, ahead: chrono::Duration) -> TestEnv {
    let env = TestEnv::on(backend).budgeted_nodes(2, 3).start().await;
    env.create_foreign_lease_renewed("node-0", "node-healthcheck", chrono::Utc::now() + ahead)
        .await;
    env
}

/// Node Health Check's clock runs a minute ahead of nmo's: its just-renewed lease has a
/// `renewTime` in nmo's future. That is clock skew, not a free lease: nmo waits behind it
/// and touches nothing (medik8s/common's rule, which takes a future renewTime as invalid,
/// would have nmo cordon and drain a node under remediation).
async fn a_foreign_lease_renewed_ahead_of_nmos_clock_is_held(backend: Backend) {
    let mut env = with_a_lease_renewed_ahead(backend, chrono::Duration::seconds(60)).await;
    let node_before = env.node("node-0").await;
    creates_nm_0_and_waits_behind(&env, "node-healthcheck").await;
    assert_eq!(env.lease_holder("node-0").await, "node-healthcheck");
    assert_eq!(
        env.node("node-0").await["spec"],
        node_before["spec"],
        "the node is untouched"
    );
    env.stop_cleanly().await;
}

/// A `renewTime` three hours ahead of nmo's clock, for a lease of one hour, is more than clock
/// skew explains: bogus. nmo takes the lease over as expired, and says so in a Warning event
/// naming the holder and how far ahead it was.
async fn a_foreign_lease_renewed_bogusly_far_ahead_is_taken_over_with_a_warning(backend: Backend) {
    let mut env = with_a_lease_renewed_ahead(backend, chrono::Duration::hours(3)).await;
    env.maintain("nm-0", "node-0").await;
    assert_eq!(env.lease_holder("node-0").await, "node-maintenance");
    env.wait_event(
        "the Warning event",
        "nm-0",
        "BogusLeaseRenewTime",
        &["node-healthcheck", "s ahead"],
    )
    .await;
    env.stop_cleanly().await;
}

both_backends!(
    a_foreign_lease_renewed_ahead_of_nmos_clock_is_held,
    a_foreign_lease_renewed_bogusly_far_ahead_is_taken_over_with_a_warning,
);
