//! What nmo does when it is told to stop (SIGTERM) with nobody to take over: it finishes the
//! undos under way, and leaves its node leases valid for minutes, not an hour.

use std::time::Duration;

use crate::support::{Backend, Phase, TestEnv, both_backends, eventually, taint_keys};

/// nmo running with node-0 drained for nm-0.
async fn drained(backend: Backend) -> TestEnv {
    TestEnv::on(backend)
        .budgeted_nodes(2, 3)
        .start_maintaining("nm-0", "node-0")
        .await
}

/// A NodeMaintenance deleted just before nmo is stopped, with no nmo to follow (the last
/// replica going, an uninstall): its node is given back and its finalizer released before nmo
/// exits, rather than left to a successor that never comes.
async fn a_stop_right_after_a_delete_finishes_the_undo_first(backend: Backend) {
    let mut env = drained(backend).await;

    env.delete_maintenance("nm-0").await;
    env.stop_cleanly().await;
    assert!(
        env.maintenance("nm-0").await.is_none(),
        "the finalizer is released before nmo exits: {:?}",
        env.maintenance("nm-0").await
    );
    let node = env.node("node-0").await;
    assert_ne!(node["spec"]["unschedulable"], true, "{node}");
    assert!(taint_keys(&node).is_empty(), "{:?}", taint_keys(&node));
    assert!(env.lease("node-0").await.is_none(), "the lease is released");
}

both_backends!(a_stop_right_after_a_delete_finishes_the_undo_first);

/// When the lease `lease` (as stored) stops being valid.
fn lease_expiry(lease: &serde_json::Value) -> chrono::DateTime<chrono::Utc> {
    let renewed = lease["spec"]["renewTime"].as_str().expect("renewed");
    let renewed = chrono::DateTime::parse_from_rfc3339(renewed).expect("a time");
    let seconds = lease["spec"]["leaseDurationSeconds"]
        .as_i64()
        .expect("a duration");
    renewed.with_timezone(&chrono::Utc) + chrono::Duration::seconds(seconds)
}

/// A stop with no successor leaves the node lease nmo's (the maintenance goes on) but valid
/// only `--lease-duration-on-stop` (5 minutes) instead of an hour after its last renewal, so
/// that Node Health Check is not kept away from a node nobody looks after; the next nmo renews
/// it for the full hour as it resumes the maintenance.
async fn a_stop_leaves_the_node_lease_valid_for_minutes_and_a_successor_renews_it(
    backend: Backend,
) {
    let mut env = drained(backend).await;
    let held = env.lease("node-0").await.expect("the lease");
    assert_eq!(held["spec"]["leaseDurationSeconds"], 3600);

    env.stop_cleanly().await;
    let stopped_at = chrono::Utc::now();
    let left = env.lease("node-0").await.expect("the lease stays");
    assert_eq!(left["spec"]["holderIdentity"], "node-maintenance");
    let expiry = lease_expiry(&left);
    let bound = chrono::Duration::seconds(300);
    assert!(
        expiry <= stopped_at + bound && expiry > stopped_at + bound - chrono::Duration::seconds(30),
        "valid until {expiry}, stopped at {stopped_at}: {left}"
    );

    env.start_operator();
    eventually(
        "the next nmo to renew the lease for an hour",
        Duration::from_secs(30),
        async || {
            let lease = env.lease("node-0").await.expect("the lease");
            lease["spec"]["leaseDurationSeconds"] == 3600
                && lease["spec"]["holderIdentity"] == "node-maintenance"
        },
    )
    .await;
    assert_eq!(env.phase("nm-0").await, Some(Phase::Succeeded));
    env.stop_cleanly().await;
}

both_backends!(a_stop_leaves_the_node_lease_valid_for_minutes_and_a_successor_renews_it);
