//! The supervisor: two NodeMaintenances for one node, a crashed node actor.

use super::*;

#[tokio::test(start_paused = true)]
async fn second_maintenance_for_a_node_is_failed_and_never_touches_it() {
    let cluster = FakeCluster::with_node("n1", 1);
    let h = Scenario::on(&cluster)
        .maintenance("first", "n1")
        .start()
        .await;
    assert!(h.wait_succeeded("first", Duration::from_secs(30)).await);
    cluster.create_maintenance("second", "n1", t0() + chrono::Duration::seconds(30));
    assert!(h.wait_failed("second", Duration::from_secs(10)).await);
    let status = cluster.status("second");
    assert!(status.last_error.unwrap().contains("first"));
    assert!(decisions::condition(&cluster.status("second"), conditions::DUPLICATE).is_some());
    assert_eq!(h.active().await, vec!["first".to_string()]);
    // Deleting the duplicate only removes its finalizer.
    cluster.delete_maintenance("second");
    assert!(h.wait_gone("second", Duration::from_secs(10)).await);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_in_maintenance(&cluster, "n1");
    assert!(cluster.lease(NS, "node-n1").is_some());
    assert_eq!(phase(&cluster, "first"), Some(Phase::Succeeded));
    assert_eq!(cluster.count_calls("emit_event UncordonNode"), 0);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn older_maintenance_wins_when_both_exist() {
    let cluster = FakeCluster::with_node("n1", 1);
    // Both exist before nmo starts (webhook off); the younger one happens to be listed first.
    cluster.create_maintenance("b-young", "n1", t0() + chrono::Duration::seconds(5));
    cluster.create_maintenance("a-old", "n1", t0());
    let h = Harness::on(&cluster).await;
    assert!(
        eventually(Duration::from_secs(30), || phase(&cluster, "a-old")
            == Some(Phase::Succeeded)
            && phase(&cluster, "b-young") == Some(Phase::Failed))
        .await
    );
    assert!(
        cluster
            .status("b-young")
            .last_error
            .unwrap()
            .contains("a-old")
    );
    assert_eq!(h.active().await, vec!["a-old".to_string()]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn crashed_node_actor_is_restarted_and_converges() {
    let cluster = n1_under_a_closed_pdb(2, "tight");
    let h = Scenario::on(&cluster).nm1().start().await;
    assert!(
        h.wait_calls("evict_pod", |n| n >= 2, Duration::from_secs(10))
            .await
    );
    let children = h.supervisor().get_children();
    assert_eq!(children.len(), 1);
    let old = children[0].get_id();
    children[0].kill();
    assert!(
        eventually(Duration::from_secs(10), || {
            let now = h.supervisor().get_children();
            now.len() == 1 && now[0].get_id() != old
        })
        .await
    );
    assert_eq!(h.active().await, vec!["nm1".to_string()]);
    cluster.set_pdb_allowed("app", "tight", 2);
    assert!(h.wait_succeeded("nm1", Duration::from_secs(120)).await);
    h.stop().await;
}

/// A crashed node actor is started again after the respawn wait (between half and all of
/// `respawn_base` the first time, with jitter), not at once.
#[tokio::test(start_paused = true)]
async fn a_crashed_node_actor_is_respawned_after_its_wait_and_not_before() {
    let cluster = n1_under_a_closed_pdb(1, "tight");
    let h = Scenario::on(&cluster)
        .config(|config| {
            config.respawn_base = Duration::from_secs(10);
            config.respawn_max = Duration::from_secs(10);
        })
        .nm1()
        .start()
        .await;
    assert!(
        h.wait_calls("evict_pod", |n| n >= 1, Duration::from_secs(10))
            .await
    );
    let children = h.supervisor().get_children();
    assert_eq!(children.len(), 1);
    children[0].kill();
    tokio::time::sleep(Duration::from_millis(4_900)).await;
    assert!(
        h.supervisor().get_children().is_empty(),
        "respawned before half the wait"
    );
    assert!(
        eventually(Duration::from_millis(5_200), || h
            .supervisor()
            .get_children()
            .len()
            == 1)
        .await,
        "not respawned once the wait was over"
    );
    assert_eq!(h.active().await, vec!["nm1".to_string()]);
    h.stop().await;
}
