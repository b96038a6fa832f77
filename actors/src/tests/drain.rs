//! Drains held up by PodDisruptionBudgets, and what the status says about them.

use super::*;

#[tokio::test(start_paused = true)]
async fn pdb_blocked_pods_are_retried_as_one_unit() {
    let cluster = n1_under_a_closed_pdb(10, "web");
    let h = Scenario::on(&cluster).nm1().start().await;
    tokio::time::sleep(Duration::from_secs(300)).await;

    let calls = cluster.count_calls("evict_pod");
    // First round: every pod once (nothing known yet); then one probe per backoff step
    // (1, 2, 4, ... capped at 60 s: about 9 in 5 minutes), not 10 per step.
    assert!(calls >= 10, "{calls}");
    assert!(calls <= 25, "PDB hammered: {calls} evictions");
    let status = cluster.status("nm1");
    assert_eq!(status.phase, Some(Phase::Running));
    assert_eq!(status.pending_pods.len(), 10);
    assert_eq!(status.drain_progress, 0);
    let error = status.last_error.clone().unwrap();
    assert!(error.contains("web"), "{error}");
    assert!(error.contains("needs"), "API message kept: {error}");
    assert!(
        status
            .pending_pods_reasons
            .iter()
            .any(|r| r.pdb.as_deref() == Some("web") && r.reason == conditions::BLOCKED_BY_PDB)
    );
    let drained = decisions::condition(&status, conditions::DRAINED).unwrap();
    assert_eq!(drained.reason, conditions::BLOCKED_BY_PDB);

    cluster.set_pdb_allowed("app", "web", 10);
    assert!(h.wait_succeeded("nm1", Duration::from_secs(120)).await);
    assert_eq!(cluster.status("nm1").last_error, None);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_pdb_allowing_one_disruption_releases_its_pods_one_at_a_time() {
    let cluster = n1_under_a_closed_pdb(6, "one");
    let h = Scenario::on(&cluster).nm1().start().await;
    // A replacement becomes Ready every 2 s: the PDB allows one more disruption.
    let pdb = cluster.clone();
    let replenish = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(2)).await;
            pdb.set_pdb_allowed("app", "one", 1);
        }
    });
    assert!(h.wait_succeeded("nm1", Duration::from_secs(120)).await);
    replenish.abort();
    let calls = cluster.count_calls("evict_pod");
    // 6 accepted, 6 refused in the first round, then about two refused probes per 2 s round.
    // Releasing every parked pod after each success would add 5 + 4 + 3 + 2 + 1 refusals.
    assert!(calls <= 28, "{calls} evictions for 6 pods");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn blocked_maintenance_does_not_delay_another() {
    let cluster = n1_under_a_closed_pdb(3, "tight");
    cluster.add_node("n2");
    for i in 0..3 {
        cluster.add_pod("n2", "other", &format!("n2-p{i}"));
    }
    let h = Scenario::on(&cluster).nm1().start().await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    let start = tokio::time::Instant::now();
    cluster.create_maintenance("nm2", "n2", t0());
    assert!(h.wait_succeeded("nm2", Duration::from_secs(10)).await);
    assert!(
        start.elapsed() < Duration::from_secs(6),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(phase(&cluster, "nm1"), Some(Phase::Running));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn delete_while_blocked_undoes_within_five_seconds() {
    let cluster = n1_under_a_closed_pdb(2, "tight");
    let h = Scenario::on(&cluster).nm1().start().await;
    assert!(h.wait_error("nm1", "tight", Duration::from_secs(30)).await);
    assert_in_maintenance(&cluster, "n1");
    let start = tokio::time::Instant::now();
    cluster.delete_maintenance("nm1");
    assert!(h.wait_gone("nm1", Duration::from_secs(5)).await);
    assert!(start.elapsed() <= Duration::from_secs(5));
    assert_released(&cluster, "n1");
    // No more evictions once deleted.
    let calls = cluster.count_calls("evict_pod");
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert_eq!(cluster.count_calls("evict_pod"), calls);
    assert_released(&cluster, "n1");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn too_many_pdbs_is_reported() {
    let cluster = FakeCluster::with_node("n1", 1);
    cluster.add_pdb("app", "a", &["n1-p0"], 5);
    cluster.add_pdb("app", "b", &["n1-p0"], 5);
    let h = Scenario::on(&cluster).nm1().start().await;
    assert!(
        h.wait_error(
            "nm1",
            "more than one PodDisruptionBudget",
            Duration::from_secs(30)
        )
        .await
    );
    let status = cluster.status("nm1");
    assert_eq!(
        status.pending_pods_reasons[0].reason,
        "TooManyPodDisruptionBudgets"
    );
    assert_eq!(status.phase, Some(Phase::Running));
    h.stop().await;
}

/// A drain holds its pods as the pod watch last delivered them, not as it first listed them:
/// once the first counts are taken, the first list is dropped. Kept, it held every pod's first
/// version for as long as the drain ran, long after the pods were gone (at 1,000 drains of 10
/// pods about 3 MB, growing with the pods per node).
#[tokio::test(start_paused = true)]
async fn a_running_drain_holds_no_version_of_the_pods_it_saw_go() {
    let cluster = FakeCluster::with_node("n1", 3);
    cluster.add_pdb("app", "closed", &["n1-p2"], 0);
    let h = Scenario::on(&cluster).nm1().start().await;
    // n1-p0 and n1-p1 are evicted and gone; n1-p2 stays behind its budget: the drain runs on.
    let only_p2 = || {
        cluster
            .pods("n1")
            .iter()
            .map(|pod| pod.name.to_string())
            .collect::<Vec<_>>()
            == ["n1-p2"]
    };
    assert!(eventually(Duration::from_secs(30), only_p2).await);
    assert!(
        eventually(Duration::from_secs(30), || {
            cluster.status("nm1").pending_pods.len() == 1
        })
        .await,
        "{:?}",
        cluster.status("nm1").pending_pods
    );
    let kept = BTreeSet::from(["app/n1-p2".to_string()]);
    assert!(
        eventually(Duration::from_secs(10), || cluster.held_watched_pods()
            == kept)
        .await,
        "still held: {:?}",
        cluster.held_watched_pods()
    );
    assert_eq!(phase(&cluster, "nm1"), Some(Phase::Running));
    h.stop().await;
}

/// The same after the pod watch ended and was subscribed again mid-drain: the new watch's first
/// list is not kept either (the counts were taken from the first watch's).
#[tokio::test(start_paused = true)]
async fn a_drain_whose_pod_watch_was_subscribed_again_holds_no_version_of_the_pods_it_saw_go() {
    let cluster = FakeCluster::with_node("n1", 4);
    cluster.add_pdb("app", "closed", &["n1-p2", "n1-p3"], 0);
    let h = Scenario::on(&cluster).nm1().start().await;
    let on_n1 = |names: &[&str]| {
        cluster
            .pods("n1")
            .iter()
            .map(|pod| pod.name.to_string())
            .collect::<Vec<_>>()
            == names
    };
    assert!(eventually(Duration::from_secs(30), || on_n1(&["n1-p2", "n1-p3"])).await);
    cluster.end_pod_watches();
    assert!(
        eventually(Duration::from_secs(60), || cluster
            .count_calls("watch_pods")
            == 2)
        .await,
        "{:?}",
        cluster.calls()
    );
    // Gone by its controller's hand while the new watch runs: the new watch's first list had it.
    assert!(cluster.remove_pod("app", "n1-p3"));
    let kept = BTreeSet::from(["app/n1-p2".to_string()]);
    assert!(
        eventually(Duration::from_secs(10), || cluster.held_watched_pods()
            == kept)
        .await,
        "still held: {:?}",
        cluster.held_watched_pods()
    );
    assert_eq!(phase(&cluster, "nm1"), Some(Phase::Running));
    h.stop().await;
}
