//! The trace a drain exports over OTLP/gRPC, as a collector receives it: one trace per
//! maintenance whose eviction attempts hang under its drain span, and a separate trace for
//! ending the maintenance that links back to it. Here the actors run against the in-memory
//! fake cluster; `observability_e2e` checks the same shape with nmo against the simulator.

use std::collections::BTreeSet;

use nmo::observability::operator_metrics::ProcessObserver;
use nmo::observability::telemetry;
use opentelemetry_otlp::{SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;

use crate::obs_support::{
    BLOCKED, FakeOperator, NODE, NS, PDB, PODS, REFUSALS, blocked_attempts,
    cluster_with_guarded_pod, drain_through_the_budget, end_maintenance,
};
use crate::otlp_receiver::{ReceivedSpan, Receiver};

const NM: &str = "nm-traced";

/// A tracer provider exporting over OTLP/gRPC to `receiver` (batched, as `nmo run` does).
pub fn provider_for(receiver: &Receiver) -> SdkTracerProvider {
    let exporter = SpanExporter::builder()
        .with_tonic()
        .with_endpoint(receiver.endpoint())
        .build()
        .unwrap();
    SdkTracerProvider::builder()
        .with_resource(Resource::builder().with_service_name("nmo-test").build())
        .with_batch_exporter(exporter)
        .build()
}

/// Exports what the provider still holds. The SDK blocks while flushing and the gRPC channel
/// runs on this runtime: flush from a blocking thread.
pub async fn flush(provider: &SdkTracerProvider) {
    let provider = provider.clone();
    tokio::task::spawn_blocking(move || provider.force_flush())
        .await
        .unwrap()
        .unwrap();
}

fn only<'a>(
    spans: &'a [ReceivedSpan],
    what: &str,
    f: impl Fn(&ReceivedSpan) -> bool,
) -> &'a ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans.iter().filter(|s| f(s)).collect();
    assert_eq!(
        found.len(),
        1,
        "expected exactly one {what}, got {found:#?}"
    );
    found[0]
}

/// What one maintenance's traces must show.
pub struct Expected<'a> {
    pub maintenance: &'a str,
    pub node: &'a str,
    pub reason: &'a str,
    /// The pod a budget refused at first, its namespace and the budget.
    pub blocked: (&'a str, &'a str),
    pub pdb: &'a str,
    /// Eviction calls made (one span each).
    pub eviction_calls: usize,
    /// Refusals by the budget, at least (0: none at all, the budget being watched).
    pub min_refusals: usize,
}

/// Checks the shape of the traces of one maintenance; returns the evicted pods' names.
pub fn check_trace_shape(spans: &[ReceivedSpan], expected: &Expected) -> BTreeSet<String> {
    assert!(spans.iter().all(|s| s.service == "nmo-test"));
    assert!(
        spans.iter().all(|s| s.name != "Actor"),
        "ractor's actor spans must stay out of the traces"
    );

    // The maintenance: one root, with what it was about and how it ended.
    let root = only(spans, "maintenance root", |s| {
        s.name == "maintenance" && s.attr("maintenance") == Some(expected.maintenance)
    });
    assert!(
        root.parent_span_id.is_empty(),
        "the maintenance span is a root"
    );
    assert_eq!(root.attr("node"), Some(expected.node));
    assert_eq!(root.attr("reason"), Some(expected.reason));
    assert_eq!(root.attr("phase"), Some("Succeeded"));
    assert_eq!(
        root.attr("trace_id"),
        Some(root.trace_id.as_str()),
        "the root carries its own trace id, as log lines show it"
    );
    let trace: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| s.trace_id == root.trace_id)
        .collect();
    let names: BTreeSet<&str> = trace.iter().map(|s| s.name.as_str()).collect();
    for name in [
        "reconcile",
        "take_lease",
        "label_taint_cordon",
        "drain",
        "evict_pod",
        "write_status",
    ] {
        assert!(names.contains(name), "no {name} span in {names:?}");
    }

    // Lease and cordon are steps of a reconcile under the root.
    let take_lease = trace
        .iter()
        .find(|s| s.name == "take_lease" && s.attr("result") == Some("ok"))
        .expect("a successful take_lease span");
    let reconcile = trace
        .iter()
        .find(|s| s.span_id == take_lease.parent_span_id)
        .expect("take_lease's parent is in the trace");
    assert_eq!(reconcile.name, "reconcile");
    assert_eq!(reconcile.parent_span_id, root.span_id);
    let last_status = trace
        .iter()
        .filter(|s| s.name == "write_status")
        .find(|s| s.attr("phase") == Some("Succeeded"))
        .expect("the Succeeded status write is traced");
    assert_eq!(last_status.parent_span_id, root.span_id);
    assert_eq!(last_status.attr("drain_progress"), Some("100"));
    let cordon = trace
        .iter()
        .find(|s| s.name == "label_taint_cordon" && s.parent_span_id == reconcile.span_id)
        .expect("the cordon is a step of the reconcile that took the lease");
    assert_eq!(cordon.attr("patched"), Some("true"));

    // Every eviction attempt hangs under the one drain span.
    let drain = only(spans, "drain span", |s| {
        s.name == "drain" && s.trace_id == root.trace_id
    });
    assert_eq!(drain.parent_span_id, root.span_id);
    assert_eq!(drain.attr("outcome"), Some("drained"));
    assert!(drain.attr("pods.to_evict").is_some());
    // The drain was blocked by the budget for a while: the drain span says by what.
    assert!(drain.attr("blocked.reason").is_some(), "{drain:?}");
    assert!(
        drain
            .attr("blocked.message")
            .is_some_and(|m| m.contains(expected.blocked.0)),
        "{drain:?}"
    );
    assert!(
        drain.events.iter().any(|e| e.starts_with("drain blocked")),
        "a blockage is an event of the drain span: {drain:?}"
    );
    let evictions: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.name == "evict_pod").collect();
    assert_eq!(
        evictions.len(),
        expected.eviction_calls,
        "one span per eviction call"
    );
    let mut pods = BTreeSet::new();
    for eviction in &evictions {
        assert_eq!(eviction.trace_id, root.trace_id, "{eviction:?}");
        assert_eq!(eviction.parent_span_id, drain.span_id, "{eviction:?}");
        assert!(eviction.attr("pod.namespace").is_some(), "{eviction:?}");
        assert!(eviction.attr("attempt").is_some(), "{eviction:?}");
        assert!(eviction.attr("outcome").is_some(), "{eviction:?}");
        assert!(eviction.attr("http.status_code").is_some(), "{eviction:?}");
        pods.insert(eviction.attr("pod.name").unwrap_or_default().to_string());
    }
    for pod in &pods {
        let last = evictions
            .iter()
            .filter(|s| s.attr("pod.name") == Some(pod.as_str()))
            .max_by_key(|s| s.attr("attempt").and_then(|a| a.parse::<u32>().ok()))
            .unwrap_or_else(|| panic!("no eviction span for {pod}"));
        assert_eq!(last.attr("outcome"), Some("evicted"), "{last:?}");
        assert_eq!(last.attr("http.status_code"), Some("201"), "{last:?}");
    }
    let refused: Vec<&&ReceivedSpan> = evictions
        .iter()
        .filter(|s| s.attr("outcome") == Some("blocked_by_pdb"))
        .collect();
    assert!(refused.len() >= expected.min_refusals, "{refused:#?}");
    if expected.min_refusals == 0 {
        // A watched budget that allows nothing gets no call, once its status is known: at most
        // one probe while it is not (a budget created a moment before, say).
        assert!(refused.len() <= 1, "{refused:#?}");
    } else {
        let attempts: BTreeSet<&str> = refused.iter().filter_map(|s| s.attr("attempt")).collect();
        assert!(
            attempts.contains("1") && attempts.contains("2"),
            "{attempts:?}"
        );
        assert!(
            refused.iter().any(|s| s.attr("backoff_ms").is_some()),
            "the backoff chosen is recorded: {refused:#?}"
        );
    }
    for span in &refused {
        assert_eq!(span.attr("pod.name"), Some(expected.blocked.0));
        assert_eq!(span.attr("pod.namespace"), Some(expected.blocked.1));
        assert_eq!(span.attr("pdb"), Some(expected.pdb));
        assert_eq!(span.attr("http.status_code"), Some("429"));
        assert!(
            span.events
                .iter()
                .any(|e| e.starts_with("blocked by a PodDisruptionBudget")),
            "the refusal is an event of the attempt: {span:?}"
        );
    }

    // Ending maintenance: its own trace, linked to the maintenance's root.
    let end = only(spans, "end_maintenance root", |s| {
        s.name == "end_maintenance" && s.attr("maintenance") == Some(expected.maintenance)
    });
    assert!(end.parent_span_id.is_empty());
    assert_ne!(end.trace_id, root.trace_id);
    assert_eq!(end.attr("node"), Some(expected.node));
    assert_eq!(end.attr("trace_id"), Some(end.trace_id.as_str()));
    assert!(
        end.links
            .contains(&(root.trace_id.clone(), root.span_id.clone())),
        "end_maintenance links to the maintenance: {:?}",
        end.links
    );
    let undo: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| s.trace_id == end.trace_id)
        .collect();
    let undo_names: BTreeSet<&str> = undo.iter().map(|s| s.name.as_str()).collect();
    for name in ["undo", "uncordon", "release_lease", "remove_finalizer"] {
        assert!(undo_names.contains(name), "no {name} in {undo_names:?}");
    }
    let release = undo.iter().find(|s| s.name == "release_lease").unwrap();
    assert_eq!(release.attr("result"), Some("ok"));
    pods
}

// current_thread: the scoped subscriber is thread-local, and every actor task runs on this
// thread. The batch exporter has its own thread; the gRPC channel runs on this runtime.
#[tokio::test]
async fn a_drain_is_one_trace_and_its_undo_a_linked_one() {
    let receiver = Receiver::start().await;
    let provider = provider_for(&receiver);
    let subscriber = tracing_subscriber::registry().with(telemetry::otel_layer(&provider));
    let guard = tracing::subscriber::set_default(subscriber);

    let cluster = cluster_with_guarded_pod();
    let operator = FakeOperator::start(cluster.clone(), ProcessObserver::default().shared()).await;
    drain_through_the_budget(&cluster, NM).await;
    let calls_to_blocked = blocked_attempts(&cluster);
    end_maintenance(&cluster, NM).await;
    operator.stop().await;
    drop(guard);
    flush(&provider).await;

    let evicted = check_trace_shape(
        &receiver.spans(),
        &Expected {
            maintenance: NM,
            node: NODE,
            reason: "test",
            blocked: (BLOCKED, NS),
            pdb: PDB,
            eviction_calls: PODS.len() - 1 + calls_to_blocked,
            min_refusals: REFUSALS,
        },
    );
    assert_eq!(evicted, PODS.iter().map(|p| p.to_string()).collect());
    let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
}
