//! The shared eviction actor: throttling, its bounded queue, its rate limit.

use super::*;

#[tokio::test(start_paused = true)]
async fn throttled_eviction_is_retried() {
    let cluster = FakeCluster::with_node("n1", 1);
    cluster.script_evictions(
        "app",
        "n1-p0",
        (0..3)
            .map(|_| EvictionOutcome::Throttled {
                retry_after: Some(Duration::from_secs(2)),
            })
            .collect(),
    );
    let h = Scenario::on(&cluster).nm1().start().await;
    assert!(h.wait_succeeded("nm1", Duration::from_secs(60)).await);
    assert_eq!(cluster.count_calls("evict_pod app/n1-p0"), 4);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn full_eviction_queue_refuses_and_asker_retries() {
    let cluster = FakeCluster::with_node("n1", 6);
    let h = Scenario::on(&cluster)
        .config(|c| {
            c.eviction_queue_bound = 2;
            c.eviction_max_in_flight = 1;
            c.eviction_rate_per_sec = 1.0;
            c.eviction_burst = 1;
        })
        .nm1()
        .start()
        .await;
    assert!(h.wait_succeeded("nm1", Duration::from_secs(120)).await);
    let stats = h.eviction_stats().await;
    assert!(stats.refused > 0, "{stats:?}");
    assert_eq!(stats.held, 0);
    assert_eq!(cluster.count_calls("evict_pod"), 6);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn rate_limit_spreads_evictions() {
    let cluster = FakeCluster::with_node("n1", 20);
    let h = Scenario::on(&cluster)
        .config(|c| {
            c.eviction_rate_per_sec = 2.0;
            c.eviction_burst = 2;
        })
        .nm1()
        .start()
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let calls = cluster.count_calls("evict_pod");
    assert!(
        (2..=10).contains(&calls),
        "{calls} evictions in ~3 s at 2/s"
    );
    assert!(h.wait_succeeded("nm1", Duration::from_secs(60)).await);
    h.stop().await;
}
