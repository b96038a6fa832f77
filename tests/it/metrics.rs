//! `/metrics` scraped after a drain counts what happened: evictions by result, maintenances by
//! phase, one drain duration, lease operations, an empty eviction queue.

use std::sync::Arc;

use nmo::observability::endpoints::metrics_router;
use nmo::observability::operator_metrics::{OperatorMetrics, ProcessObserver};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::obs_support::{
    FakeOperator, PODS, blocked_attempts, cluster_with_guarded_pod, drain_through_the_pdb,
    end_maintenance, http_get,
};

const NM: &str = "nm-metered";

/// The value of the sample `series` (name and labels exactly as exposed), if present.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            (name == series).then(|| value.parse().ok()).flatten()
        })
}

pub fn value(text: &str, series: &str) -> f64 {
    sample(text, series).unwrap_or_else(|| panic!("no sample {series} in:\n{text}"))
}

#[tokio::test]
async fn metrics_after_a_drain_count_what_happened() {
    let metrics = OperatorMetrics::default();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(nmo::observability::http::serve(
        listener,
        metrics_router(Arc::new(registry)),
        false,
        async {
            let _ = stopped.await;
        },
    ));

    let cluster = cluster_with_guarded_pod();
    let operator =
        FakeOperator::start(cluster.clone(), ProcessObserver::new(metrics).shared()).await;
    drain_through_the_pdb(&cluster, NM).await;
    let refusals = blocked_attempts(&cluster) - 1;

    let (status, text) = http_get(address, "/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(
        value(&text, "nmo_evictions_total{result=\"evicted\"}"),
        PODS.len() as f64
    );
    assert_eq!(
        value(&text, "nmo_evictions_total{result=\"blocked_by_pdb\"}"),
        refusals as f64
    );
    assert_eq!(sample(&text, "nmo_evictions_total{result=\"error\"}"), None);
    assert_eq!(value(&text, "nmo_maintenances{phase=\"Succeeded\"}"), 1.0);
    assert_eq!(value(&text, "nmo_maintenances{phase=\"Running\"}"), 0.0);
    assert_eq!(value(&text, "nmo_drain_duration_seconds_count"), 1.0);
    assert!(value(&text, "nmo_drain_passes_total") >= 1.0);
    let took = value(&text, "nmo_drain_duration_seconds_sum");
    assert!(took > 0.0 && took < 10.0, "drain took {took} s");
    assert_eq!(
        value(
            &text,
            "nmo_lease_operations_total{operation=\"acquire\",result=\"ok\"}"
        ),
        1.0
    );
    assert_eq!(value(&text, "nmo_eviction_queue_depth"), 0.0);
    assert_eq!(value(&text, "nmo_evictions_in_flight"), 0.0);
    // controller-runtime's families: each node actor operation is one reconcile.
    let ours =
        |family: &str, labels: &str| format!("{family}{{controller=\"nodemaintenance\"{labels}}}");
    assert!(
        value(
            &text,
            &ours("controller_runtime_reconcile_total", ",result=\"success\"")
        ) >= 2.0
    );
    assert_eq!(
        value(
            &text,
            &ours("controller_runtime_reconcile_time_seconds_count", "")
        ),
        value(
            &text,
            &ours("controller_runtime_reconcile_total", ",result=\"success\"")
        ) + value(
            &text,
            &ours("controller_runtime_reconcile_total", ",result=\"error\"")
        )
    );
    assert_eq!(
        value(&text, &ours("controller_runtime_active_workers", "")),
        0.0
    );
    assert_eq!(
        value(
            &text,
            &ours("controller_runtime_max_concurrent_reconciles", "")
        ),
        1.0
    );
    assert!(value(&text, &ours("workqueue_adds_total", ",name=\"eviction\"")) >= PODS.len() as f64);
    assert_eq!(
        value(&text, &ours("workqueue_depth", ",name=\"eviction\"")),
        0.0
    );

    end_maintenance(&cluster, NM).await;
    let (_, text) = http_get(address, "/metrics").await;
    assert_eq!(
        value(&text, "nmo_maintenances{phase=\"Succeeded\"}"),
        0.0,
        "an ended maintenance is no longer counted"
    );
    assert_eq!(
        value(
            &text,
            "nmo_lease_operations_total{operation=\"release\",result=\"ok\"}"
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            "controller_runtime_max_concurrent_reconciles{controller=\"nodemaintenance\"}"
        ),
        0.0,
        "no node actor left"
    );
    assert!(
        text.ends_with("# EOF\n"),
        "OpenMetrics text ends with # EOF"
    );

    operator.stop().await;
    let _ = stop.send(());
    server.await.unwrap();
}
