//! Events: core/v1 and events.k8s.io/v1 are one storage; each API reads the other's.

use serde_json::json;

use super::harness::{MERGE_PATCH, Pair, Req, compare};

// Events about cluster-scoped objects (nodes, NodeMaintenances) live in `default`, as nmo
// files them; each case names its events uniquely.
const CORE: &str = "/api/v1/namespaces/default/events";
const NEW: &str = "/apis/events.k8s.io/v1/namespaces/default/events";

/// What nmo sends: an events.k8s.io/v1 event about a cluster-scoped NodeMaintenance.
fn new_event(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": name},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "nmo", "reportingInstance": "nmo-0",
        "action": "Drain", "reason": "BeginMaintenance", "type": "Normal",
        "note": "Begin a node maintenance",
        "regarding": {"apiVersion": "nodemaintenance.medik8s.io/v1beta1",
                      "kind": "NodeMaintenance", "name": "nm-x", "uid": "u-1"}
    })
}

/// What kubectl and older clients send: a core/v1 event.
fn core_event(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": "node-x", "uid": "u-2"},
        "reason": "UncordonNode", "message": "uncordoned", "type": "Normal",
        "source": {"component": "nmo"},
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z",
        "count": 1
    })
}

#[tokio::test]
async fn an_events_k8s_io_event_is_created_as_given() {
    let pair = Pair::start().await;
    let e1 = pair.unique("event");
    let (sim, real) = pair.both(Req::post(NEW, new_event(&e1))).await;
    compare("POST an events.k8s.io/v1 event", &sim, &real).same();
}

#[tokio::test]
async fn an_events_k8s_io_event_reads_as_a_core_event() {
    let pair = Pair::start().await;
    let name = pair.unique("event");
    pair.seed(Req::post(NEW, new_event(&name))).await;
    let (sim, real) = pair.both(Req::get(format!("{CORE}/{name}"))).await;
    compare("an events.k8s.io/v1 event through core/v1", &sim, &real).same();
}

#[tokio::test]
async fn a_core_event_reads_as_an_events_k8s_io_event() {
    let pair = Pair::start().await;
    let name = pair.unique("event");
    pair.seed(Req::post(CORE, core_event(&name))).await;
    let (sim, real) = pair.both(Req::get(format!("{NEW}/{name}"))).await;
    compare("a core/v1 event through events.k8s.io/v1", &sim, &real).same();
}

#[tokio::test]
async fn an_events_k8s_io_event_without_its_required_fields_is_a_422() {
    let pair = Pair::start().await;
    let mut invalid = new_event(&pair.unique("event"));
    let fields = invalid.as_object_mut().expect("an object");
    fields.remove("reportingController");
    fields.remove("eventTime");
    let (sim, real) = pair.both(Req::post(NEW, invalid)).await;
    compare(
        "POST an events.k8s.io/v1 event without its required fields",
        &sim,
        &real,
    )
    .same();
}

#[tokio::test]
async fn a_repeated_event_is_patched_with_a_series() {
    let pair = Pair::start().await;
    let name = pair.unique("event");
    pair.seed(Req::post(NEW, new_event(&name))).await;
    let (sim, real) = pair
        .both(Req::patch(
            format!("{NEW}/{name}"),
            MERGE_PATCH,
            json!({"series": {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"}}),
        ))
        .await;
    compare("a series patched onto an event", &sim, &real).same();
}

#[tokio::test]
async fn an_event_about_a_cluster_scoped_object_outside_default_is_a_422() {
    let pair = Pair::start().await;
    let (sim, real) = pair
        .both(Req::post(
            "/apis/events.k8s.io/v1/namespaces/{ns}/events",
            new_event(&pair.unique("event")),
        ))
        .await;
    compare(
        "POST an event about a NodeMaintenance outside default",
        &sim,
        &real,
    )
    .same();
}
