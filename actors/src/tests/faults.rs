//! Trust under faults (1): hung calls, another operator owning the node, one writer, and
//! giving up that survives a crash. (The lease's health, orphans, identity by uid and retry
//! pacing are in `resilience`.)

use crate::model::{EXCLUDE_LABEL_VALUE, NodeRecord};

use super::*;

// --- 1. deadlines ---------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_hung_call_never_keeps_the_undo_from_starting() {
    let (cluster, h) = nm1_succeeded(1, Duration::from_secs(30)).await;
    // The drift repair's patch goes out on a connection that never answers.
    cluster.hang_next("patch_node", 1);
    set_unschedulable(&cluster, "n1", false);
    assert!(
        h.wait_calls("patch_node", |n| n >= 2, Duration::from_secs(10))
            .await,
        "the repair is out"
    );
    cluster.delete_maintenance("nm1");
    assert!(
        h.wait_gone("nm1", Duration::from_secs(60)).await,
        "the undo ran once the hung call's deadline passed"
    );
    assert_released(&cluster, "n1");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_hung_eviction_does_not_keep_its_slot() {
    let cluster = FakeCluster::with_node("n1", 3);
    let h = Harness::paused(&cluster, |c| c.eviction_max_in_flight = 1).await;
    cluster.hang_next("evict_pod", 1);
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        h.wait_succeeded("nm1", Duration::from_secs(120)).await,
        "the other evictions went out once the hung one's deadline passed"
    );
    assert!(cluster.pods("n1").is_empty());
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_hung_daemonset_lookup_does_not_block_the_drain() {
    let cluster = FakeCluster::with_node("n1", 1);
    cluster.add_pod_info(
        "n1",
        PodInfo::test("kube-system", "agent-n1").controlled_by("DaemonSet", "agent"),
    );
    cluster.add_daemonset("kube-system", "agent");
    cluster.hang_next("daemonset_exists", 1);
    let h = Scenario::on(&cluster).nm1().start().await;
    assert!(h.wait_succeeded("nm1", Duration::from_secs(120)).await);
    let left: Vec<String> = cluster
        .pods("n1")
        .into_iter()
        .map(|p| p.name.to_string())
        .collect();
    assert_eq!(left, ["agent-n1"], "the DaemonSet pod stays");
    h.stop().await;
}

// --- 2. only undo what nmo did ---------------------------------------------------------------

/// The example: a remediation operator holds the node's lease and has cordoned the
/// node; a NodeMaintenance waits behind it, touching nothing, and is deleted: the node stays
/// cordoned with its taint.
#[tokio::test(start_paused = true)]
async fn a_maintenance_that_only_waited_undoes_nothing() {
    let cluster = FakeCluster::new();
    cluster.set_node(cordoned_by_someone_else("n1"));
    let h = waiting_behind_a_foreign_lease(&cluster, 3600, Duration::from_secs(10)).await;
    cluster.delete_maintenance("nm1");
    assert!(h.wait_gone("nm1", Duration::from_secs(10)).await);
    let node = cluster.node("n1").unwrap();
    assert!(node.unschedulable, "the remediation's cordon stays");
    assert_eq!(taint_keys(&node), [UNSCHEDULABLE_TAINT_KEY]);
    assert_eq!(
        cluster.count_calls("patch_node"),
        0,
        "the node was never touched"
    );
    assert_eq!(
        lease_holder(&cluster, "n1").as_deref(),
        Some("node-healthcheck")
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_node_cordoned_before_the_maintenance_stays_cordoned_after_it_even_across_a_restart() {
    let cluster = FakeCluster::new();
    let mut before = cordoned_by_someone_else("n1");
    before
        .labels
        .insert(EXCLUDE_LABEL.into(), EXCLUDE_LABEL_VALUE.into());
    cluster.set_node(before);
    cluster.add_pod("n1", "app", "web-0");
    let h = Scenario::on(&cluster).nm1().start().await;
    assert!(h.wait_succeeded("nm1", Duration::from_secs(30)).await);
    let during = cluster.node("n1").unwrap();
    assert_in_maintenance(&cluster, "n1");
    assert_eq!(
        during.record,
        Some(NodeRecord {
            maintenance: "uid-nm1".into(),
            cordoned: true,
            drain_taint: false,
            unschedulable_taint: true,
            label: true,
            prior_unknown: false,
        }),
        "what was there before is recorded on the node"
    );
    // nmo crashes; the record is in the cluster, not in its memory.
    drop(h);
    let h = Harness::on(&cluster).await;
    cluster.delete_maintenance("nm1");
    assert!(h.wait_gone("nm1", Duration::from_secs(30)).await);
    let after = cluster.node("n1").unwrap();
    assert!(after.unschedulable, "cordoned before: still cordoned");
    assert_eq!(taint_keys(&after), [UNSCHEDULABLE_TAINT_KEY]);
    assert_eq!(
        after.labels.get(EXCLUDE_LABEL).map(String::as_str),
        Some("true"),
        "the label someone else set stays"
    );
    assert_eq!(after.record, None);
    assert!(cluster.lease(NS, "node-n1").is_none());
    h.stop().await;
}

// --- 3. one writer ---------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn nothing_the_actors_started_lands_after_they_stopped() {
    let (cluster, h) = nm1_succeeded(1, Duration::from_secs(30)).await;
    // A drift repair is on its way (its patch answers in 5 s, within the call deadline)...
    cluster.delay_next("patch_node", 1, Duration::from_secs(5));
    set_unschedulable(&cluster, "n1", false);
    assert!(
        h.wait_calls("patch_node", |n| n >= 2, Duration::from_secs(2))
            .await,
        "the repair is out"
    );
    // ... when this replica hands over: once stopped, nothing of it may land.
    h.stop().await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(
        !cluster.node("n1").unwrap().unschedulable,
        "the old leader's repair landed after it stopped"
    );
}

// --- 4. giving up is crash safe --------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_restart_between_giving_up_and_undoing_still_undoes() {
    let (cluster, h) = succeeded_with_renewals_every_10s().await;
    // The lease can no longer be renewed, and the undo cannot get through either.
    cluster.fail_next("update_lease", transient(1000));
    cluster.fail_next("patch_node", transient(1000));
    assert!(h.wait_failed("nm1", Duration::from_secs(120)).await);
    let failed = cluster.status("nm1");
    let restored = decisions::condition(&failed, conditions::NODE_RESTORED).unwrap();
    assert_eq!(
        (restored.status.as_str(), restored.reason.as_str()),
        ("False", conditions::UNDO_DUE)
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_in_maintenance(&cluster, "n1");
    // nmo crashes before its undo got through; the API recovers.
    drop(h);
    cluster.clear_scripts();
    let h = Harness::on(&cluster).await;
    assert!(
        wait_no_lease(&cluster, "n1", Duration::from_secs(60)).await,
        "the restarted nmo undid the maintenance that gave up"
    );
    assert_released(&cluster, "n1");
    assert!(
        eventually(Duration::from_secs(10), || decisions::condition(
            &cluster.status("nm1"),
            conditions::NODE_RESTORED
        )
        .is_some_and(|c| c.status == "True"))
        .await
    );
    assert_eq!(phase(&cluster, "nm1"), Some(Phase::Failed));
    h.stop().await;
}
