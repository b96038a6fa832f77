//! A maintenance from start to undo: drain, deletion, drift, restarts, a missing node.

use super::*;

#[tokio::test(start_paused = true)]
async fn drains_node_and_succeeds() {
    let cluster = FakeCluster::with_node("n1", 2);
    let pod = |name| PodInfo::test("app", name);
    cluster.add_pod_info("n1", pod("cache").unmanaged().with_empty_dir());
    cluster.add_pod_info("n1", pod("agent").controlled_by("DaemonSet", "agent-ds"));
    cluster.add_daemonset("app", "agent-ds");
    cluster.add_pod_info("n1", pod("orphan").controlled_by("DaemonSet", "gone-ds"));
    cluster.add_pod_info("n1", pod("kube-proxy").unmanaged().mirror());
    cluster.add_pod_info(
        "n1",
        pod("job")
            .controlled_by("Job", "job")
            .in_phase(PodPhase::Succeeded),
    );
    let h = Scenario::on(&cluster).nm1().start().await;

    assert!(h.wait_succeeded("nm1", Duration::from_secs(30)).await);
    let status = cluster.status("nm1");
    assert_eq!(status.drain_progress, 100);
    assert_eq!(status.total_pods, 7);
    assert_eq!(
        status.eviction_pods, 5,
        "2 + emptyDir + orphan DS + finished"
    );
    assert!(status.pending_pods.is_empty() && status.pending_pods_refs.is_empty());
    assert_eq!(status.last_error, None);
    assert!(status.last_update.is_some());
    let drained = decisions::condition(&status, conditions::DRAINED).unwrap();
    assert_eq!(drained.status, "True");
    assert!(cluster.maintenance("nm1").unwrap().has_finalizer());
    assert_in_maintenance(&cluster, "n1");

    let left: Vec<String> = cluster
        .pods("n1")
        .into_iter()
        .map(|p| p.name.to_string())
        .collect();
    assert_eq!(left, vec!["agent".to_string(), "kube-proxy".to_string()]);
    assert_eq!(cluster.count_calls("evict_pod app/cache"), 1);
    assert_eq!(cluster.count_calls("evict_pod app/n1-p0"), 1);
    assert_eq!(cluster.count_calls("delete_pod app/job"), 1);
    assert_eq!(
        cluster.count_calls("evict_pod app/orphan"),
        1,
        "an orphaned DaemonSet pod is evicted: a budget may cover it"
    );
    assert_eq!(cluster.count_calls("delete_pod app/orphan"), 0);
    assert_eq!(cluster.count_calls("evict_pod app/agent"), 0);
    assert_eq!(cluster.count_calls("evict_pod app/kube-proxy"), 0);

    let lease = cluster.lease(NS, "node-n1").unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some(LEASE_HOLDER));
    assert_eq!(lease.lease_duration_seconds, Some(3600));
    assert_eq!(cluster.lease_owner(NS, "node-n1").unwrap().uid, "uid-n1");
    let reasons = cluster.event_reasons();
    assert_eq!(reasons, vec!["BeginMaintenance", "SucceedMaintenance"]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn undo_on_delete() {
    let cluster = FakeCluster::with_node("n1", 2);
    let mut node = cluster.node("n1").unwrap();
    node.taints.push(foreign_taint());
    cluster.set_node(node);
    let h = Scenario::on(&cluster).nm1().start().await;
    assert!(h.wait_succeeded("nm1", Duration::from_secs(30)).await);
    cluster.delete_maintenance("nm1");
    assert!(h.wait_gone("nm1", Duration::from_secs(10)).await);
    assert_released(&cluster, "n1");
    assert_eq!(cluster.node("n1").unwrap().taints, vec![foreign_taint()]);
    assert!(cluster.lease(NS, "node-n1").is_none(), "lease deleted");
    let events = cluster.events();
    let uncordon = events.iter().find(|e| e.reason == "UncordonNode").unwrap();
    assert!(matches!(&uncordon.target, EventTarget::Node { name, .. } if name == "n1"));
    assert_eq!(events.last().unwrap().reason, "RemovedMaintenance");
    assert!(eventually(Duration::from_secs(5), || true).await);
    assert!(h.active().await.is_empty());
    // Never re-cordoned afterwards.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_released(&cluster, "n1");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn drift_is_repaired() {
    let (cluster, h) = nm1_succeeded(1, Duration::from_secs(30)).await;
    // Someone uncordons, untaints and unlabels, and adds a taint of their own.
    let mut node = cluster.node("n1").unwrap();
    node.unschedulable = false;
    node.taints = vec![foreign_taint()];
    node.labels.clear();
    cluster.set_node(node);
    let start = tokio::time::Instant::now();
    assert!(
        eventually(Duration::from_secs(5), || decisions::node_in_maintenance(
            &cluster.node("n1").unwrap()
        ))
        .await
    );
    assert!(start.elapsed() <= Duration::from_secs(5));
    let node = cluster.node("n1").unwrap();
    assert!(node.taints.contains(&foreign_taint()), "foreign taint kept");
    assert_eq!(node.taints.len(), 3);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn concurrent_taint_change_is_retried_from_a_fresh_read() {
    let cluster = FakeCluster::with_node("n1", 1);
    cluster.fail_next(
        "patch_node",
        vec![ClusterError::Conflict("test op failed".into())],
    );
    let h = Scenario::on(&cluster).nm1().start().await;
    assert!(h.wait_succeeded("nm1", Duration::from_secs(30)).await);
    assert_in_maintenance(&cluster, "n1");
    assert!(cluster.count_calls("patch_node") >= 2);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_maintenance_fresh_from_the_watch_is_not_read_again() {
    let (cluster, h) = nm1_succeeded(1, Duration::from_secs(60)).await;
    assert_eq!(
        cluster.count_calls("get_maintenance"),
        0,
        "{:?}",
        cluster.calls()
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_maintenance_seen_at_start_stays_failed_without_a_re_read() {
    let cluster = FakeCluster::with_node("n1", 1);
    cluster.create_maintenance("nm1", "n1", t0());
    cluster.put_maintenance(
        Maintenance::test("nm1")
            .on("n1")
            .with_finalizer()
            .with_status(MaintenanceStatus {
                phase: Some(Phase::Failed),
                last_error: Some("failed to extend lease owned by us: timeout".into()),
                ..MaintenanceStatus::default()
            }),
    );
    let h = Harness::on(&cluster).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_released(&cluster, "n1");
    assert_eq!(phase(&cluster, "nm1"), Some(Phase::Failed));
    assert_eq!(
        cluster.count_calls("patch_node"),
        0,
        "{:?}",
        cluster.calls()
    );
    h.stop().await;
}

/// `nm1` for node `node`, which does not exist, Failed.
async fn nm1_failed_for_a_missing_node(node: &str) -> (FakeCluster, Harness) {
    let cluster = FakeCluster::new();
    let h = Scenario::on(&cluster)
        .maintenance("nm1", node)
        .start()
        .await;
    assert!(h.wait_failed("nm1", Duration::from_secs(10)).await);
    (cluster, h)
}

#[tokio::test(start_paused = true)]
async fn missing_node_fails_without_retry() {
    let (cluster, h) = nm1_failed_for_a_missing_node("ghost").await;
    let status = cluster.status("nm1");
    assert!(status.last_error.unwrap().contains("ghost"));
    let event = cluster
        .events()
        .into_iter()
        .find(|e| e.reason == "FailedMaintenance")
        .unwrap();
    assert_eq!(event.type_, EventType::Warning);
    let reads = cluster.count_calls("get_node");
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(cluster.count_calls("get_node"), reads, "no retry");
    assert_eq!(cluster.count_calls("create_lease"), 0);
    assert_eq!(
        cluster
            .event_reasons()
            .iter()
            .filter(|r| *r == "FailedMaintenance")
            .count(),
        1
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn missing_node_retried_when_the_spec_changes() {
    let (cluster, h) = nm1_failed_for_a_missing_node("late").await;
    cluster.add_node("late");
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        phase(&cluster, "nm1"),
        Some(Phase::Failed),
        "no retry on its own"
    );
    let mut nm = cluster.maintenance("nm1").unwrap();
    nm.reason = "node is back".into();
    cluster.put_maintenance(nm);
    assert!(h.wait_succeeded("nm1", Duration::from_secs(30)).await);
    assert_in_maintenance(&cluster, "late");
    assert_eq!(cluster.status("nm1").last_error, None);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn restart_mid_drain_converges() {
    // The state a crashed nmo left: finalizer, Running status, node cordoned, our lease, two of
    // three pods still there.
    let cluster = FakeCluster::with_node("n1", 0);
    cluster.add_pod("n1", "app", "p1");
    cluster.add_pod("n1", "app", "p2");
    cluster.set_node(NodeState::test("n1").in_maintenance(t0()));
    cluster.put_lease(
        Lease::test("n1", LEASE_HOLDER).renewed(t0() - chrono::Duration::minutes(10), 3600),
    );
    let refs = vec![
        PodRef {
            namespace: "app".into(),
            name: "p1".into(),
        },
        PodRef {
            namespace: "app".into(),
            name: "p2".into(),
        },
    ];
    cluster.put_maintenance(
        Maintenance::test("nm1")
            .on("n1")
            .with_reason("r")
            .with_finalizer()
            .with_status(MaintenanceStatus {
                phase: Some(Phase::Running),
                drain_progress: 33,
                pending_pods: vec!["p1".into(), "p2".into()].into(),
                pending_pods_refs: refs.into(),
                total_pods: 3,
                eviction_pods: 3,
                ..MaintenanceStatus::default()
            }),
    );
    let h = Harness::on(&cluster).await;
    assert!(h.wait_succeeded("nm1", Duration::from_secs(30)).await);
    let status = cluster.status("nm1");
    assert_eq!((status.total_pods, status.eviction_pods), (3, 3));
    assert_eq!(status.drain_progress, 100);
    assert!(cluster.pods("n1").is_empty());
    assert_eq!(cluster.count_calls("add_finalizer"), 0);
    assert!(
        !cluster
            .event_reasons()
            .contains(&"BeginMaintenance".to_string())
    );
    let lease = cluster.lease(NS, "node-n1").unwrap();
    assert_eq!(
        lease.lease_transitions,
        Some(0),
        "our lease renewed, not taken over"
    );
    assert_eq!(lease.renew_time, Some(t0()));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn restart_during_deletion_finishes_undo() {
    let cluster = FakeCluster::with_node("n1", 0);
    cluster.set_node(NodeState::test("n1").in_maintenance(t0()));
    cluster.put_lease(Lease::test("n1", LEASE_HOLDER));
    cluster.create_maintenance("nm1", "n1", t0());
    cluster.put_maintenance(
        Maintenance::test("nm1")
            .on("n1")
            .with_finalizer()
            .being_deleted(),
    );
    let h = Harness::on(&cluster).await;
    assert!(h.wait_gone("nm1", Duration::from_secs(10)).await);
    assert_released(&cluster, "n1");
    assert!(cluster.lease(NS, "node-n1").is_none());
    h.stop().await;
}

/// A NodeMaintenance whose node name is no node's (`""`: the pod watch would see every
/// unscheduled pod of the cluster) is Failed at once, naming the field: its node is never read
/// nor watched, its pods never listed, no lease taken; its deletion touches nothing either.
#[tokio::test(start_paused = true)]
async fn an_invalid_node_name_is_failed_without_a_call_about_the_node() {
    let cluster = FakeCluster::with_node("n1", 1);
    let problem = "invalid spec.nodeName \"\": a node name is a DNS-1123 subdomain";
    let h = Scenario::on(&cluster)
        .create(
            Maintenance::test("nm1")
                .on("")
                .invalid(crate::model::SpecField::NodeName, problem),
        )
        .start()
        .await;
    assert!(h.wait_failed("nm1", Duration::from_secs(10)).await);
    assert_eq!(cluster.status("nm1").last_error.as_deref(), Some(problem));
    assert!(
        cluster
            .event_reasons()
            .contains(&"FailedMaintenance".to_string())
    );
    cluster.delete_maintenance("nm1");
    assert!(h.wait_gone("nm1", Duration::from_secs(10)).await);
    let about_the_node: Vec<String> = cluster
        .calls()
        .into_iter()
        .filter(|c| {
            let ops = [
                "watch_node ",
                "watch_pods",
                "get_node",
                "list_pods",
                "get_lease",
                "create_lease",
                "update_lease",
                "delete_lease",
                "patch_node",
            ];
            ops.iter().any(|op| c.starts_with(op))
        })
        .collect();
    assert!(about_the_node.is_empty(), "{about_the_node:?}");
    h.stop().await;
}

/// A record of another maintenance on the node (left behind by the Go operator's undo after a
/// rollback, say) under a person's cordon is never reused: the new maintenance records the node
/// as it is (cordoned), says so in a Warning event on the node and its `PriorStateRecorded`
/// condition, and its undo leaves the person's cordon.
#[tokio::test(start_paused = true)]
async fn a_record_of_another_maintenance_is_replaced_and_said() {
    let cluster = FakeCluster::with_node("n1", 0);
    let mut node = NodeState::test("n1");
    node.unschedulable = true;
    node.record = Some(crate::model::NodeRecord {
        maintenance: "uid-long-gone".into(),
        cordoned: false,
        drain_taint: false,
        unschedulable_taint: false,
        label: false,
        prior_unknown: false,
    });
    cluster.set_node(node);
    // Created before nmo starts, so the orphan sweep leaves the node to it.
    cluster.create(Maintenance::test("nm1").on("n1"));
    let h = Harness::on(&cluster).await;
    assert!(h.wait_succeeded("nm1", Duration::from_secs(30)).await);
    let record = cluster.node("n1").and_then(|n| n.record).expect("a record");
    assert_eq!(record.maintenance, "uid-nm1");
    assert!(record.cordoned, "made from the node as it is: {record:?}");
    assert_eq!(cluster.status("nm1").node_record, Some(record));
    let said = cluster.events().into_iter().find(|e| {
        e.reason == crate::model::reasons::RECORD_FOREIGN
            && matches!(&e.target, EventTarget::Node { name, .. } if name == "n1")
    });
    let said = said.expect("a RecordForeign event on the node");
    assert_eq!(said.type_, EventType::Warning);
    assert!(said.message.contains("uid-long-gone"), "{}", said.message);
    let status = cluster.status("nm1");
    let condition = decisions::condition(&status, conditions::PRIOR_STATE_RECORDED)
        .expect("the PriorStateRecorded condition");
    assert_eq!(condition.reason, conditions::RECORD_REPLACED);

    cluster.delete_maintenance("nm1");
    assert!(h.wait_gone("nm1", Duration::from_secs(30)).await);
    let after = cluster.node("n1").expect("the node");
    assert!(after.unschedulable, "the person's cordon stays");
    assert!(after.record.is_none(), "the undo removes the record");
    h.stop().await;
}
