//! The trace a drain exports over OTLP/gRPC, as a collector receives it: one trace per
//! maintenance whose eviction attempts hang under its drain span, and a separate trace for
//! ending the maintenance that links back to it.

use std::collections::BTreeSet;

use nmo::operator_metrics::ProcessObserver;
use nmo::telemetry;
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

fn provider_for(receiver: &Receiver) -> SdkTracerProvider {
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
    let flush = provider.clone();
    tokio::task::spawn_blocking(move || flush.force_flush())
        .await
        .unwrap()
        .unwrap();
    let spans = receiver.spans();

    assert!(spans.iter().all(|s| s.service == "nmo-test"));
    assert!(
        spans.iter().all(|s| s.name != "Actor"),
        "ractor's actor spans must stay out of the traces"
    );

    // The maintenance: one root, with what it was about and how it ended.
    let root = only(&spans, "maintenance root", |s| s.name == "maintenance");
    assert!(
        root.parent_span_id.is_empty(),
        "the maintenance span is a root"
    );
    assert_eq!(root.attr("node"), Some(NODE));
    assert_eq!(root.attr("maintenance"), Some(NM));
    assert_eq!(root.attr("reason"), Some("test"));
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
    for expected in [
        "reconcile",
        "take_lease",
        "label_taint_cordon",
        "drain",
        "evict_pod",
    ] {
        assert!(names.contains(expected), "no {expected} span in {names:?}");
    }

    // Lease and cordon are steps of a reconcile under the root.
    let take_lease = trace
        .iter()
        .find(|s| s.name == "take_lease" && s.attr("result") == Some("ok"));
    let take_lease = take_lease.expect("a successful take_lease span");
    let reconcile = trace
        .iter()
        .find(|s| s.span_id == take_lease.parent_span_id)
        .expect("take_lease's parent is in the trace");
    assert_eq!(reconcile.name, "reconcile");
    assert_eq!(reconcile.parent_span_id, root.span_id);
    let cordon = trace
        .iter()
        .find(|s| s.name == "label_taint_cordon")
        .unwrap();
    assert_eq!(cordon.parent_span_id, reconcile.span_id);
    assert_eq!(cordon.attr("patched"), Some("true"));

    // Every eviction attempt hangs under the one drain span.
    let drain = only(&spans, "drain span", |s| s.name == "drain");
    assert_eq!(drain.trace_id, root.trace_id);
    assert_eq!(drain.parent_span_id, root.span_id);
    assert_eq!(drain.attr("outcome"), Some("drained"));
    assert_eq!(drain.attr("pods.to_evict"), Some("3"));
    let evictions: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.name == "evict_pod").collect();
    assert_eq!(
        evictions.len(),
        PODS.len() - 1 + calls_to_blocked,
        "one span per eviction call"
    );
    for eviction in &evictions {
        assert_eq!(eviction.trace_id, root.trace_id, "{eviction:?}");
        assert_eq!(eviction.parent_span_id, drain.span_id, "{eviction:?}");
        assert_eq!(eviction.attr("pod.namespace"), Some(NS));
        assert!(eviction.attr("attempt").is_some(), "{eviction:?}");
    }
    for pod in PODS {
        let last = evictions
            .iter()
            .filter(|s| s.attr("pod.name") == Some(pod))
            .max_by_key(|s| s.attr("attempt").and_then(|a| a.parse::<u32>().ok()))
            .unwrap_or_else(|| panic!("no eviction span for {pod}"));
        assert_eq!(last.attr("outcome"), Some("evicted"), "{last:?}");
        assert_eq!(last.attr("http.status_code"), Some("201"), "{last:?}");
    }
    let refused: Vec<&&ReceivedSpan> = evictions
        .iter()
        .filter(|s| s.attr("outcome") == Some("blocked_by_pdb"))
        .collect();
    assert!(refused.len() >= REFUSALS, "{refused:#?}");
    let attempts: BTreeSet<&str> = refused.iter().filter_map(|s| s.attr("attempt")).collect();
    assert!(
        attempts.contains("1") && attempts.contains("2"),
        "{attempts:?}"
    );
    for span in &refused {
        assert_eq!(span.attr("pod.name"), Some(BLOCKED));
        assert_eq!(span.attr("pdb"), Some(PDB));
        assert_eq!(span.attr("http.status_code"), Some("429"));
        assert!(
            span.events
                .iter()
                .any(|e| e.starts_with("blocked by a PodDisruptionBudget")),
            "the refusal is an event of the attempt: {span:?}"
        );
    }
    assert!(
        refused.iter().any(|s| s.attr("backoff_ms").is_some()),
        "the backoff chosen is recorded: {refused:#?}"
    );

    // Ending maintenance: its own trace, linked to the maintenance's root.
    let end = only(&spans, "end_maintenance root", |s| {
        s.name == "end_maintenance"
    });
    assert!(end.parent_span_id.is_empty());
    assert_ne!(end.trace_id, root.trace_id);
    assert_eq!(end.attr("node"), Some(NODE));
    assert_eq!(end.attr("trace_id"), Some(end.trace_id.as_str()));
    assert!(
        end.links
            .contains(&(root.trace_id.clone(), root.span_id.clone())),
        "end_maintenance links to the maintenance: {:?}",
        end.links
    );
    let undo_names: BTreeSet<&str> = spans
        .iter()
        .filter(|s| s.trace_id == end.trace_id)
        .map(|s| s.name.as_str())
        .collect();
    for expected in ["undo", "uncordon", "release_lease", "remove_finalizer"] {
        assert!(
            undo_names.contains(expected),
            "no {expected} in {undo_names:?}"
        );
    }
    let release = spans.iter().find(|s| s.name == "release_lease").unwrap();
    assert_eq!(release.attr("result"), Some("ok"));

    tokio::task::spawn_blocking(move || provider.shutdown())
        .await
        .unwrap()
        .unwrap();
}
