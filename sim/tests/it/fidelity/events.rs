//! Events: core/v1 and events.k8s.io/v1 are one storage; each API reads the other's.

use nmo_envtest::unique_name;
use serde_json::json;

use super::fixtures::fresh;
use super::harness::{Compare, MERGE_PATCH, Pair, Req};

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

/// Creates the event `create` builds (for a unique name) in `api` on both, then compares what
/// both answer to the request `then` builds for that event's path in `read`.
async fn created_then(
    what: &str,
    (api, create): (&str, fn(&str) -> serde_json::Value),
    read: &str,
    then: impl FnOnce(String) -> Req,
) -> Compare {
    let pair = Pair::start().await;
    let name = pair.unique("event");
    pair.seed(Req::post(api, create(&name))).await;
    pair.compare(what, then(format!("{read}/{name}"))).await
}

#[tokio::test]
async fn an_events_k8s_io_event_is_created_as_given() {
    let req = Req::post(NEW, new_event(&unique_name("event")));
    fresh("POST an events.k8s.io/v1 event", req).await.same();
}

#[tokio::test]
async fn an_events_k8s_io_event_reads_as_a_core_event() {
    let what = "an events.k8s.io/v1 event through core/v1";
    created_then(what, (NEW, new_event), CORE, Req::get)
        .await
        .same();
}

#[tokio::test]
async fn a_core_event_reads_as_an_events_k8s_io_event() {
    let what = "a core/v1 event through events.k8s.io/v1";
    created_then(what, (CORE, core_event), NEW, Req::get)
        .await
        .same();
}

#[tokio::test]
async fn an_events_k8s_io_event_without_its_required_fields_is_a_422() {
    let mut invalid = new_event(&unique_name("event"));
    let fields = invalid.as_object_mut().expect("an object");
    fields.remove("reportingController");
    fields.remove("eventTime");
    let what = "POST an events.k8s.io/v1 event without its required fields";
    fresh(what, Req::post(NEW, invalid)).await.same();
}

#[tokio::test]
async fn a_repeated_event_is_patched_with_a_series() {
    let series = json!({"series": {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"}});
    let patch = |path| Req::patch(path, MERGE_PATCH, series);
    created_then(
        "a series patched onto an event",
        (NEW, new_event),
        NEW,
        patch,
    )
    .await
    .same();
}

#[tokio::test]
async fn an_event_about_a_cluster_scoped_object_outside_default_is_a_422() {
    let elsewhere = "/apis/events.k8s.io/v1/namespaces/{ns}/events";
    let req = Req::post(elsewhere, new_event(&unique_name("event")));
    fresh("POST an event about a NodeMaintenance outside default", req)
        .await
        .same();
}
