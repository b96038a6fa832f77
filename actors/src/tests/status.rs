//! What the status and the observer are told, and how often.

use super::*;

/// Records what the actors report to their observer.
#[derive(Default)]
struct Recorder {
    seen: std::sync::Mutex<Vec<String>>,
}

impl Recorder {
    fn push(&self, what: String) {
        self.seen.lock().unwrap().push(what);
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    fn count(&self, what: &str) -> usize {
        self.seen().iter().filter(|s| *s == what).count()
    }
}

impl crate::observe::Observer for Recorder {
    fn eviction(&self, result: crate::observe::EvictionResult) {
        self.push(format!("eviction {}", result.as_str()));
    }

    fn maintenance_phase(&self, from: Option<Phase>, to: Option<Phase>) {
        let name = |p: Option<Phase>| p.map_or("-", Phase::as_str);
        self.push(format!("phase {} -> {}", name(from), name(to)));
    }

    fn drain_finished(&self, _took: Duration) {
        self.push("drained".to_string());
    }

    fn lease_operation(&self, op: crate::observe::LeaseOp, result: crate::observe::LeaseResult) {
        self.push(format!("lease {} {}", op.as_str(), result.as_str()));
    }

    fn drain_pass(&self) {
        self.push("drain pass".to_string());
    }
}

/// A paused harness over `cluster`, configured by `configure`, whose observer is the returned
/// recorder.
async fn recorded(
    cluster: &FakeCluster,
    configure: impl FnOnce(&mut crate::config::Config) + Send + 'static,
) -> (Harness, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    let observer: Arc<dyn crate::observe::Observer> = recorder.clone();
    let h = Harness::paused(cluster, move |c| {
        c.observer = observer;
        configure(c);
    })
    .await;
    (h, recorder)
}

/// A pod the full eviction queue refused is asked for again on every retry tick, and nothing
/// in the node's pod list needs a call: the tick takes the list in without a drain pass (at
/// 2,000 nodes, a pass per tick per waiting drain classified every pod again).
#[tokio::test(start_paused = true)]
async fn a_retry_tick_asks_for_refused_pods_again_without_a_drain_pass() {
    let cluster = FakeCluster::with_node("n1", 2);
    let (h, recorder) = recorded(&cluster, |c| c.eviction_queue_bound = 0).await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(30), || recorder
            .count("eviction queue_full")
            >= 2)
        .await
    );
    let passes = recorder.count("drain pass");
    let refused = recorder.count("eviction queue_full");
    assert!(passes >= 1, "{:?}", recorder.seen());
    tokio::time::sleep(Duration::from_secs(31)).await;
    // Six ticks of 5 s, each asking for both pods again.
    assert!(
        recorder.count("eviction queue_full") >= refused + 10,
        "{:?}",
        recorder.seen()
    );
    assert_eq!(
        recorder.count("drain pass"),
        passes,
        "{:?}",
        recorder.seen()
    );
    assert_eq!(cluster.count_calls("evict_pod"), 0);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn status_written_only_when_it_changes() {
    let (cluster, h) = nm1_succeeded(1, Duration::from_secs(30)).await;
    let writes = cluster.count_calls("write_status");
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(cluster.count_calls("write_status"), writes);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_observer_hears_evictions_phases_drain_and_lease_operations() {
    let cluster = FakeCluster::with_node("n1", 3);
    cluster.add_pdb("app", "web", &["n1-p2"], 0);
    let (h, recorder) = recorded(&cluster, |c| {
        c.lease_renew_interval = Duration::from_secs(600);
    })
    .await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(30), || recorder
            .count("eviction blocked_by_pdb")
            >= 2)
        .await
    );
    assert_eq!(recorder.count("drained"), 0);
    cluster.set_pdb_allowed("app", "web", 1);
    assert!(h.wait_succeeded("nm1", Duration::from_secs(120)).await);
    assert_eq!(recorder.count("eviction evicted"), 3);
    assert_eq!(
        recorder.count("eviction blocked_by_pdb"),
        cluster.count_calls("evict_pod app/n1-p2") - 1
    );
    assert_eq!(recorder.count("drained"), 1);
    tokio::time::sleep(Duration::from_secs(1800)).await;
    assert_eq!(recorder.count("lease acquire ok"), 1);
    assert!(
        recorder.count("lease renew ok") >= 2,
        "{:?}",
        recorder.seen()
    );

    cluster.delete_maintenance("nm1");
    assert!(h.wait_gone("nm1", Duration::from_secs(10)).await);
    assert_eq!(recorder.count("lease release ok"), 1);
    let phases: Vec<String> = recorder
        .seen()
        .into_iter()
        .filter(|s| s.starts_with("phase"))
        .collect();
    assert_eq!(
        phases,
        [
            "phase - -> Running",
            "phase Running -> Succeeded",
            "phase Succeeded -> -"
        ]
    );
    h.stop().await;
}

/// Drains that began together write their progress at the drains' shared pace, not all in the
/// same second once their windows end: on a real API server, 1,000 drains that wrote
/// `Running` in the same seconds wrote their progress 560 times in 20 s (28 a second against
/// a pace of 5), and the evictions slowed by half while they did.
#[tokio::test(start_paused = true)]
async fn drains_that_began_together_write_their_progress_at_the_shared_pace() {
    const NODES: usize = 100;
    let cluster = FakeCluster::new();
    for n in 0..NODES {
        let node = format!("n{n}");
        cluster.add_node(&node);
        for p in 0..2 {
            cluster.add_pod(&node, "app", &format!("{node}-p{p}"));
        }
    }
    // Evicted pods stay (terminating) until the test removes them.
    cluster.set_evicted_pods_linger(true);
    let h = Harness::paused(&cluster, |c| c.eviction_burst = 1_000).await;
    for n in 0..NODES {
        cluster.create_maintenance(&format!("nm{n}"), &format!("n{n}"), t0());
    }
    let all_evicted = eventually(Duration::from_secs(60), || {
        cluster.count_calls("evict_pod") >= 2 * NODES
    })
    .await;
    assert!(
        all_evicted,
        "{} evictions",
        cluster.count_calls("evict_pod")
    );
    // Whatever the start wrote is written.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = cluster.count_calls("write_status");

    // Every drain makes progress in the same second: one of its two pods is gone.
    for n in 0..NODES {
        assert!(cluster.remove_pod("app", &format!("n{n}-p0")));
    }
    // 100 drains under the default eviction rate (50/s) share 5 progress writes a second.
    let mut per_second = Vec::new();
    let mut last = before;
    for _ in 0..90 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = cluster.count_calls("write_status");
        per_second.push(now - last);
        last = now;
    }
    let busiest = per_second.iter().copied().max().unwrap_or_default();
    assert!(
        busiest <= 6,
        "{busiest} progress writes in one second: {per_second:?}"
    );
    assert_eq!(
        last - before,
        NODES,
        "each drain wrote its progress once: {per_second:?}"
    );
    assert!(
        (0..NODES).all(|n| cluster.status(&format!("nm{n}")).drain_progress == 50),
        "every status says half the pods left"
    );
    h.stop().await;
}
