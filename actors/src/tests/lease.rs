//! The node lease: taking, waiting behind another holder, renewing, losing it.

use super::pdbs::{web_cluster_with, web_pdb};
use super::*;

#[tokio::test(start_paused = true)]
async fn lease_renewed_over_simulated_hours() {
    let (cluster, h) = nm1_succeeded(1, Duration::from_secs(30)).await;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_secs(1800)).await;
        let lease = cluster.lease(NS, "node-n1").unwrap();
        assert!(
            decisions::lease_valid(&lease, h.now()),
            "lease lapsed at {}: {lease:?}",
            h.now()
        );
    }
    // 5 hours at one renewal per 20 minutes.
    assert!(cluster.count_calls("update_lease") >= 14);
    let lease = cluster.lease(NS, "node-n1").unwrap();
    assert_eq!(lease.lease_transitions, Some(0));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn foreign_valid_lease_waits_then_proceeds() {
    let cluster = FakeCluster::with_node("n1", 2);
    let h = waiting_behind_a_foreign_lease(&cluster, 60, Duration::from_secs(10)).await;
    let status = cluster.status("nm1");
    assert_eq!(status.phase, Some(Phase::Running));
    assert_eq!(status.error_on_lease_count, 0);
    let cond = decisions::condition(&status, conditions::LEASE_ACQUIRED).unwrap();
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("False", conditions::LEASE_HELD_BY_OTHER)
    );
    let node = cluster.node("n1").unwrap();
    assert!(!node.unschedulable && node.taints.is_empty() && node.labels.is_empty());
    assert_eq!(cluster.count_calls("evict_pod"), 0);
    // Re-checked at least every 5 s while waiting.
    let reads = cluster.count_calls("get_lease");
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(cluster.count_calls("get_lease") >= reads + 4);

    assert!(h.wait_succeeded("nm1", Duration::from_secs(60)).await);
    let lease = cluster.lease(NS, "node-n1").unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some(LEASE_HOLDER));
    assert_eq!(lease.lease_transitions, Some(2));
    let status = cluster.status("nm1");
    assert_eq!(status.last_error, None);
    assert_eq!(
        decisions::condition(&status, conditions::LEASE_ACQUIRED)
            .unwrap()
            .status,
        "True"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn expired_foreign_lease_is_taken_over() {
    let cluster = FakeCluster::with_node("n1", 1);
    cluster.put_lease(foreign_lease(t0() - chrono::Duration::hours(2), 3600, 4));
    let h = Scenario::on(&cluster).nm1().start().await;
    assert!(h.wait_succeeded("nm1", Duration::from_secs(30)).await);
    let lease = cluster.lease(NS, "node-n1").unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some(LEASE_HOLDER));
    assert_eq!(lease.lease_transitions, Some(5));
    assert_eq!(lease.lease_duration_seconds, Some(3600));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn lease_errors_above_three_fail_and_undo() {
    let (cluster, h) = succeeded_with_renewals_every_10s().await;
    // Renewals keep failing (each failed one is retried within seconds; a failure counts
    // once per renewal interval).
    cluster.fail_next("update_lease", transient(1000));
    assert!(h.wait_failed("nm1", Duration::from_secs(120)).await);
    let status = cluster.status("nm1");
    assert_eq!(status.error_on_lease_count, 4);
    assert!(status.last_error.unwrap().contains("lease"));
    assert!(wait_uncordoned(&cluster, "n1", Duration::from_secs(10)).await);
    assert_released(&cluster, "n1");
    let failed = cluster
        .events()
        .into_iter()
        .find(|e| e.reason == "FailedMaintenance")
        .unwrap();
    assert_eq!(failed.type_, EventType::Warning);
    // Failed stays Failed: nothing re-cordons.
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_released(&cluster, "n1");
    // Deleting it still releases the finalizer.
    cluster.delete_maintenance("nm1");
    assert!(h.wait_gone("nm1", Duration::from_secs(10)).await);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_first_maintenance_creates_its_lease_without_reading_it_first() {
    let (cluster, h) = nm1_succeeded(1, Duration::from_secs(60)).await;
    assert_eq!(cluster.count_calls("get_lease"), 0, "{:?}", cluster.calls());
    // The first create may find the lease namespace missing (then it is created): two at most.
    assert!(cluster.count_calls("create_lease") <= 2);
    let lease = cluster.lease(NS, "node-n1").unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some(LEASE_HOLDER));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_first_maintenance_finding_a_lease_reads_it_and_respects_its_holder() {
    let cluster = FakeCluster::with_node("n1", 1);
    let h = waiting_behind_a_foreign_lease(&cluster, 3600, Duration::from_secs(30)).await;
    assert!(
        cluster.count_calls("get_lease") >= 1,
        "the refused create led to a read"
    );
    let lease = cluster.lease(NS, "node-n1").unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some("node-healthcheck"));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn lease_errors_before_evictions_do_not_count() {
    let cluster = FakeCluster::with_node("n1", 1);
    cluster.fail_next(
        "get_lease",
        (0..6)
            .map(|_| ClusterError::Transient("timeout".into()))
            .collect(),
    );
    let h = Scenario::on(&cluster).nm1().start().await;
    assert!(h.wait_succeeded("nm1", Duration::from_secs(60)).await);
    assert_eq!(cluster.status("nm1").error_on_lease_count, 0);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn foreign_lease_left_alone_on_undo() {
    let (cluster, h) = nm1_succeeded(0, Duration::from_secs(30)).await;
    // Someone else takes the lease over (e.g. after it was deleted by hand).
    let ours = cluster.lease(NS, "node-n1").unwrap();
    cluster.put_lease(Lease {
        holder_identity: Some("node-healthcheck".into()),
        ..ours
    });
    cluster.delete_maintenance("nm1");
    assert!(h.wait_gone("nm1", Duration::from_secs(10)).await);
    let lease = cluster.lease(NS, "node-n1").unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some("node-healthcheck"));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn lease_taken_by_another_holder_counts_and_fails() {
    let (cluster, h) = succeeded_with_renewals_every_10s().await;
    // Another operator grabs a valid lease (it should not, but nmo must cope).
    cluster.put_lease(foreign_lease(h.now(), 3600, 9));
    assert!(
        eventually(Duration::from_secs(20), || cluster
            .status("nm1")
            .error_on_lease_count
            >= 1)
        .await
    );
    assert!(h.wait_failed("nm1", Duration::from_secs(60)).await);
    // nmo takes back what is its alone (label, drain taint); the cordon and its taint now
    // serve the lease's holder (a remediation, say): nmo never uncordons a node in the middle
    // of someone else's work.
    assert!(
        eventually(Duration::from_secs(10), || !cluster
            .node("n1")
            .unwrap()
            .labels
            .contains_key(EXCLUDE_LABEL))
        .await
    );
    let node = cluster.node("n1").unwrap();
    assert!(node.unschedulable, "still cordoned for the holder");
    let keys: Vec<&str> = node.taints.iter().map(|t| t.key.as_str()).collect();
    assert_eq!(keys, [UNSCHEDULABLE_TAINT_KEY]);
    assert_eq!(node.record, None);
    // Their lease is not ours to delete.
    assert_eq!(
        lease_holder(&cluster, "n1").as_deref(),
        Some("node-healthcheck")
    );
    h.stop().await;
}

/// `nm1`'s drain held by budget `web` (two pods on `n1`, none may go).
async fn drain_blocked_by_a_budget() -> (FakeCluster, Harness) {
    let cluster = web_cluster_with(&["n1"], 2, web_pdb(0));
    let h = Scenario::on(&cluster).nm1().start().await;
    assert!(
        h.wait_error("nm1", "web", Duration::from_secs(20)).await,
        "blocked by the budget: {:?}",
        cluster.status("nm1")
    );
    (cluster, h)
}

/// The takeover: a drain blocked by a budget, and another operator overwrites the
/// node lease with a fresh renewal (as Node Health Check, or an admin forcing a takeover,
/// does). The lease watch tells the node actor at once: no eviction goes out after it, even
/// once the budget would allow them; every attempt to take the lease back counts, and the
/// fourth gives up (Failed, naming the new holder, with a Warning event), never Succeeded. The
/// foreign lease is never written.
#[tokio::test(start_paused = true)]
async fn a_lease_taken_mid_drain_stops_evictions_at_once_and_fails_naming_the_holder() {
    let (cluster, h) = drain_blocked_by_a_budget().await;
    let evictions = cluster.count_calls("evict_pod");
    let taken_at = tokio::time::Instant::now();
    cluster.put_lease(foreign_lease(h.now(), 3600, 1));
    let taken = cluster.lease(NS, "node-n1").unwrap();
    // The budget lets both pods go right after: nmo must not take the offer.
    tokio::time::sleep(Duration::from_millis(500)).await;
    cluster.put_watched_pdb(web_pdb(2));
    assert!(h.wait_failed("nm1", Duration::from_secs(30)).await);
    assert!(
        taken_at.elapsed() <= Duration::from_secs(15),
        "gave up {:?} after the takeover",
        taken_at.elapsed()
    );
    assert_eq!(
        cluster.count_calls("evict_pod"),
        evictions,
        "an eviction after the takeover: {:?}",
        cluster.calls()
    );
    assert_eq!(cluster.pods("n1").len(), 2, "both pods stay");
    let status = cluster.status("nm1");
    assert_eq!(status.error_on_lease_count, 4);
    let error = status.last_error.unwrap_or_default();
    assert!(error.contains("node-healthcheck"), "{error}");
    let failed = cluster
        .events()
        .into_iter()
        .find(|e| e.reason == "FailedMaintenance")
        .expect("a FailedMaintenance event");
    assert_eq!(failed.type_, EventType::Warning);
    assert!(failed.message.contains("node-healthcheck"), "{failed:?}");
    // Never Succeeded on the way.
    assert!(
        !cluster
            .events()
            .iter()
            .any(|e| e.reason == "SucceedMaintenance")
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        cluster.lease(NS, "node-n1"),
        Some(taken),
        "the foreign lease was written"
    );
    h.stop().await;
}

/// A drain held by a budget (two pods, none may go), then its leader stops: the cluster and
/// the moment of the handover.
async fn blocked_drain_whose_leader_stopped() -> (FakeCluster, chrono::DateTime<chrono::Utc>) {
    let (cluster, h) = drain_blocked_by_a_budget().await;
    let handover = h.now();
    h.stop().await;
    (cluster, handover)
}

/// A leader hands over in the middle of a drain, and another operator takes the node lease
/// before the new leader renews it (the soak's takeover right after an API server restart
/// cost the old leader its leadership). The status the old leader wrote says nmo held the
/// lease, so the new leader counts every attempt that finds it held and gives up (Failed,
/// the node undone) instead of waiting behind the holder for a lease it already had.
#[tokio::test(start_paused = true)]
async fn a_lease_taken_across_a_leader_handover_still_fails_the_maintenance() {
    let (cluster, handover) = blocked_drain_whose_leader_stopped().await;
    cluster.put_lease(foreign_lease(handover, 3600, 1));
    let taken = cluster.lease(NS, "node-n1").unwrap();
    let h = Harness::on(&cluster).await;
    assert!(
        h.wait_failed("nm1", Duration::from_secs(30)).await,
        "not Failed: {:?}",
        cluster.status("nm1")
    );
    let status = cluster.status("nm1");
    assert_eq!(status.error_on_lease_count, 4);
    assert_eq!(
        cluster.lease(NS, "node-n1").unwrap(),
        taken,
        "never written"
    );
    assert_eq!(cluster.pods("n1").len(), 2, "both pods stay");
    h.stop().await;
}

/// As above, but the status write that said nmo held the lease never landed before the old
/// leader went (its `LeaseAcquired` still says "taking the node lease"): the node carries this
/// maintenance's record, which nmo writes only while it holds the lease, so the new leader
/// still counts the holder as a takeover and gives up.
#[tokio::test(start_paused = true)]
async fn a_lease_taken_across_a_handover_fails_even_when_the_status_never_said_it_was_held() {
    let (cluster, handover) = blocked_drain_whose_leader_stopped().await;
    let mut nm = cluster.maintenance("nm1").unwrap();
    let mut status = cluster.status("nm1");
    for condition in &mut status.conditions {
        if condition.type_ == "LeaseAcquired" {
            condition.status = "False".into();
            condition.reason = "NotStarted".into();
        }
    }
    nm.status = Some(status);
    cluster.put_maintenance(nm);
    cluster.put_lease(foreign_lease(handover, 3600, 1));
    let h = Harness::on(&cluster).await;
    assert!(
        h.wait_failed("nm1", Duration::from_secs(30)).await,
        "not Failed: {:?}",
        cluster.status("nm1")
    );
    assert_eq!(cluster.status("nm1").error_on_lease_count, 4);
    assert_eq!(cluster.pods("n1").len(), 2, "both pods stay");
    h.stop().await;
}
