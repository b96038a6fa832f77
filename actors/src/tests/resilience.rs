//! Trust under faults (2): the node lease kept healthy, orphaned nodes given back, a
//! maintenance known by its uid, and no retry storms (growing waits, paced restarts).

use crate::model::{EXCLUDE_LABEL_VALUE, NodeRecord, Uid, reasons};
use crate::supervisor::{Remembered, SupervisorMsg};

use super::*;

// --- 5. node lease health --------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_failed_renewal_is_retried_within_seconds() {
    let (cluster, h) = nm1_succeeded(1, Duration::from_secs(30)).await;
    cluster.fail_next("update_lease", transient(1));
    let renewals = cluster.count_calls("update_lease");
    // The first renewal is due after 20 minutes; it fails.
    tokio::time::sleep(Duration::from_secs(1200)).await;
    assert!(
        h.wait_calls(
            "update_lease",
            |n| n >= renewals + 2,
            Duration::from_secs(15)
        )
        .await,
        "retried within seconds, not at the next 20-minute tick"
    );
    let lease = cluster.lease(NS, "node-n1").unwrap();
    assert!(decisions::lease_valid(&lease, h.now()));
    assert!(
        eventually(Duration::from_secs(5), || cluster
            .status("nm1")
            .error_on_lease_count
            == 0)
        .await,
        "renewed: the count is reset"
    );
    h.stop().await;
}

/// nm1's status says its evictions are paused.
fn assert_evictions_paused(cluster: &FakeCluster) {
    let last_error = cluster.status("nm1").last_error;
    assert!(
        last_error
            .as_deref()
            .is_some_and(|e| e.contains("evictions paused")),
        "{last_error:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn evictions_pause_while_the_lease_is_about_to_expire() {
    let cluster = n1_under_a_closed_pdb(1, "web");
    let h = Scenario::on(&cluster)
        .config(|c| {
            c.lease_duration = Duration::from_secs(60);
            c.lease_renew_interval = Duration::from_secs(20);
            // The PDB is probed at least every 2 s.
            c.backoff_max = Duration::from_secs(2);
        })
        .nm1()
        .start()
        .await;
    assert!(
        h.wait_calls("evict_pod", |n| n >= 1, Duration::from_secs(10))
            .await,
        "the drain is blocked by the budget: {:?}",
        cluster.calls()
    );
    // Renewals fail from now on; the lease is ours until about 60 s after it was taken.
    cluster.fail_next("update_lease", transient(1000));
    tokio::time::sleep(Duration::from_secs(57)).await;
    assert_evictions_paused(&cluster);
    // A pod arriving meanwhile changes nothing: no eviction, and the status still says why.
    cluster.add_pod("n1", "app", "late");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_evictions_paused(&cluster);
    // The PDB would allow the eviction now, but the lease may be someone else's soon.
    cluster.set_pdb_allowed("app", "web", 1);
    let calls = cluster.count_calls("evict_pod");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        cluster.count_calls("evict_pod"),
        calls,
        "no eviction without the lease"
    );
    assert_eq!(cluster.pods("n1").len(), 2);
    // The API recovers: the lease is renewed and the drain goes on.
    cluster.clear_scripts();
    assert!(h.wait_succeeded("nm1", Duration::from_secs(60)).await);
    assert!(cluster.pods("n1").is_empty());
    h.stop().await;
}

// --- 7. nothing orphaned ---------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn orphaned_nodes_and_leases_are_given_back_and_nothing_else() {
    let cluster = FakeCluster::new();
    // n1: changed for a NodeMaintenance whose finalizer was removed by hand while nmo was
    // down; it was cordoned by someone else before.
    let mut n1 = cordoned_by_someone_else("n1").in_maintenance(t0());
    n1.record = Some(NodeRecord {
        maintenance: "uid-gone".into(),
        cordoned: true,
        drain_taint: false,
        unschedulable_taint: true,
        label: false,
        prior_unknown: false,
    });
    cluster.set_node(n1);
    cluster.put_lease(Lease::test("n1", LEASE_HOLDER).renewed(t0(), 3600));
    // n2: labelled by a person to keep remediation away; nmo never touched it.
    let mut n2 = NodeState::test("n2");
    n2.labels
        .insert(EXCLUDE_LABEL.into(), EXCLUDE_LABEL_VALUE.into());
    cluster.set_node(n2.clone());
    // n3: another operator's lease, not nmo's business.
    cluster.add_node("n3");
    cluster.put_lease(Lease::test("n3", "node-healthcheck").renewed(t0(), 3600));
    // n4: changed by the Go operator (no record) for a NodeMaintenance that still exists.
    cluster.set_node(NodeState::test("n4").in_maintenance(t0()));
    cluster.put_lease(Lease::test("n4", LEASE_HOLDER).renewed(t0(), 3600));
    cluster.put_maintenance(
        Maintenance::test("nm4")
            .on("n4")
            .with_finalizer()
            .with_status(MaintenanceStatus {
                phase: Some(Phase::Succeeded),
                drain_progress: 100,
                ..MaintenanceStatus::default()
            }),
    );
    // n5: a lease of nmo's whose NodeMaintenance is gone, on an untouched node.
    cluster.add_node("n5");
    cluster.put_lease(Lease::test("n5", LEASE_HOLDER).renewed(t0(), 3600));

    let h = Harness::on(&cluster).await;
    assert!(
        eventually(Duration::from_secs(10), || cluster
            .lease(NS, "node-n1")
            .is_none()
            && cluster.lease(NS, "node-n5").is_none())
        .await
    );
    let n1 = cluster.node("n1").unwrap();
    assert!(n1.unschedulable, "cordoned before nmo: stays cordoned");
    assert_eq!(taint_keys(&n1), [UNSCHEDULABLE_TAINT_KEY]);
    assert!(!n1.labels.contains_key(EXCLUDE_LABEL));
    assert_eq!(n1.record, None);
    assert_eq!(cluster.node("n2").unwrap(), {
        let mut expected = n2;
        expected.resource_version = cluster.node("n2").unwrap().resource_version;
        expected
    });
    assert_eq!(
        cluster
            .lease(NS, "node-n3")
            .unwrap()
            .holder_identity
            .as_deref(),
        Some("node-healthcheck")
    );
    assert_in_maintenance(&cluster, "n4");
    assert!(cluster.lease(NS, "node-n4").is_some());
    assert_eq!(phase(&cluster, "nm4"), Some(Phase::Succeeded));
    h.stop().await;
}

// --- 8. identity is the uid ------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_maintenance_created_again_under_the_same_name_starts_once_the_old_undo_is_over() {
    let (cluster, h) = nm1_succeeded(1, Duration::from_secs(30)).await;
    // The old one's undo is slow (its patch answers late) ...
    cluster.delay_next("patch_node", 1, Duration::from_secs(5));
    cluster.delete_maintenance("nm1");
    assert!(
        h.wait_calls("patch_node", |n| n >= 2, Duration::from_secs(2))
            .await,
        "the undo is out"
    );
    // ... while someone removes its finalizer by hand and creates it again.
    let old = cluster.maintenance("nm1").unwrap();
    cluster.put_maintenance(Maintenance {
        finalizers: vec![],
        ..old
    });
    assert!(cluster.maintenance("nm1").is_none());
    cluster.create(Maintenance {
        uid: "uid-nm1-again".into(),
        ..Maintenance::test("nm1").on("n1").created_at(t0())
    });
    assert!(
        h.wait_succeeded("nm1", Duration::from_secs(60)).await,
        "the new NodeMaintenance runs"
    );
    assert_in_maintenance(&cluster, "n1");
    assert_eq!(
        cluster.node("n1").unwrap().record.map(|r| r.maintenance),
        Some(Uid::from("uid-nm1-again"))
    );
    assert_eq!(h.active().await, ["nm1"]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn nothing_is_remembered_of_maintenances_that_are_gone() {
    let cluster = FakeCluster::new();
    for i in 0..10 {
        cluster.add_node(&format!("n{i}"));
    }
    let h = Harness::on(&cluster).await;
    for round in 0..3 {
        for i in 0..10 {
            cluster.create(Maintenance {
                uid: format!("uid-nm{i}-{round}").into(),
                ..Maintenance::test(&format!("nm{i}")).on(&format!("n{i}"))
            });
        }
        for i in 0..10 {
            assert!(
                h.wait_succeeded(&format!("nm{i}"), Duration::from_secs(30))
                    .await
            );
        }
        for i in 0..10 {
            cluster.delete_maintenance(&format!("nm{i}"));
        }
        for i in 0..10 {
            assert!(
                h.wait_gone(&format!("nm{i}"), Duration::from_secs(30))
                    .await
            );
        }
    }
    // And one whose finalizer is removed by hand while its undo is out: its deletion is
    // reported before its actor ends.
    cluster.create_maintenance("late", "n0", t0());
    assert!(h.wait_succeeded("late", Duration::from_secs(30)).await);
    cluster.delay_next("patch_node", 1, Duration::from_secs(5));
    let patches = cluster.count_calls("patch_node");
    cluster.delete_maintenance("late");
    assert!(
        h.wait_calls("patch_node", |n| n > patches, Duration::from_secs(2))
            .await,
        "the undo is out"
    );
    let late = cluster.maintenance("late").unwrap();
    cluster.put_maintenance(Maintenance {
        finalizers: vec![],
        ..late
    });
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(h.active().await, Vec::<String>::new());
    let remembered = ractor::call!(h.supervisor(), SupervisorMsg::Remembered).unwrap();
    assert_eq!(remembered, Remembered::default(), "{remembered:?}");
    h.stop().await;
}

// --- 10. no retry storms ---------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_failing_step_is_retried_with_growing_waits() {
    let cluster = FakeCluster::with_node("n1", 1);
    // The node comes from the node watch: the step that fails is the finalizer's patch.
    cluster.fail_next("add_finalizer", transient(1000));
    let h = Scenario::on(&cluster).nm1().start().await;
    tokio::time::sleep(Duration::from_secs(300)).await;
    let reads = cluster.count_calls("add_finalizer");
    // A fixed 5 s retry would have read it 60 times; backing off from 1 s up to 2 minutes
    // (with jitter: half to all of each step) reads it at most 15 times.
    assert!((5..=15).contains(&reads), "{reads} reads in 5 minutes");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_crashing_node_actor_is_restarted_with_growing_waits() {
    let cluster = FakeCluster::with_node("n1", 1);
    // The node actor crashes each time it opens its node watch.
    cluster.panic_next("watch_node", 1000);
    let h = Scenario::on(&cluster).nm1().start().await;
    tokio::time::sleep(Duration::from_secs(300)).await;
    let starts = cluster.count_calls("watch_node");
    // Restarted every second, it would have crashed about 300 times.
    assert!((3..=12).contains(&starts), "{starts} crashes in 5 minutes");
    cluster.clear_scripts();
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(
        phase(&cluster, "nm1"),
        Some(Phase::Succeeded),
        "and it recovers"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn maintenances_resumed_at_once_start_paced() {
    let cluster = FakeCluster::new();
    for i in 0..100 {
        let node = format!("n{i}");
        cluster.set_node(NodeState::test(&node).in_maintenance(t0()));
        cluster.put_lease(Lease::test(&node, LEASE_HOLDER).renewed(t0(), 3600));
        cluster.put_maintenance(
            Maintenance::test(&format!("nm{i}"))
                .on(&node)
                .with_finalizer()
                .with_status(MaintenanceStatus {
                    phase: Some(Phase::Succeeded),
                    drain_progress: 100,
                    ..MaintenanceStatus::default()
                }),
        );
    }
    let h = Harness::on(&cluster).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Each maintenance opens its node watch as it starts.
    let early = cluster.count_calls("watch_node");
    // The burst (20) starts at once, the rest at 20 per second: not all 100 in one instant.
    assert!(
        (15..=25).contains(&early),
        "{early} started in the first 100 ms"
    );
    assert!(
        h.wait_calls("watch_node", |n| n == 100, Duration::from_secs(10))
            .await,
        "every maintenance is resumed within seconds"
    );
    h.stop().await;
}

/// A NodeMaintenance created for an orphaned node while the sweep is on its way (its first
/// read is slow) loses nothing to it: the sweep looks at the node again just before undoing
/// it, finds it driven, and leaves it alone (no uncordon, no lease deleted).
#[tokio::test(start_paused = true)]
async fn the_sweep_leaves_alone_a_node_a_maintenance_began_to_drive_meanwhile() {
    let cluster = FakeCluster::with_node("n1", 0);
    let mut orphan = NodeState::test("n1").in_maintenance(t0());
    orphan.record = Some(NodeRecord {
        maintenance: "uid-gone".into(),
        cordoned: false,
        drain_taint: false,
        unschedulable_taint: false,
        label: false,
        prior_unknown: false,
    });
    cluster.set_node(orphan);
    cluster.put_lease(Lease::test("n1", LEASE_HOLDER).renewed(t0(), 3600));
    // The sweep's first look at the node's lease takes 5 s.
    cluster.delay_next("get_lease", 1, Duration::from_secs(5));
    let h = Harness::on(&cluster).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.create_maintenance("nm-new", "n1", t0());
    assert!(h.wait_succeeded("nm-new", Duration::from_secs(30)).await);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        cluster.count_calls("delete_lease"),
        0,
        "{:?}",
        cluster.calls()
    );
    assert!(
        !cluster
            .event_reasons()
            .contains(&reasons::UNCORDON.to_string()),
        "the new maintenance's node was uncordoned: {:?}",
        cluster.events()
    );
    assert_in_maintenance(&cluster, "n1");
    assert!(cluster.lease(NS, "node-n1").is_some());
    h.stop().await;
}
