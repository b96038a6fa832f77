//! WATCH from a resourceVersion, with selectors, and a resourceVersion too old to watch from.

use std::time::Duration;

use serde_json::{Value, json};

use super::fixtures::{PODS, pod, pod_at};
use super::harness::{Compare, MERGE_PATCH, Pair, Req, Side, compare};

/// Opens on each server a watch of `query` from the current resourceVersion (of each), runs
/// `changes` on both, and compares the events each watch delivered before it timed out (the
/// first `pods` of them about pods the simulator defaults a service account for).
async fn watch_during(what: &str, query: &str, changes: Vec<Req>, pods: usize) -> Compare {
    let pair = Pair::start().await;
    let lists = pair.both(Req::get(PODS)).await;
    let open = |side: Side| {
        let rv = side.of(&lists).body["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        Req::get(format!(
            "{PODS}?watch=1&timeoutSeconds=3&resourceVersion={rv}{query}"
        ))
    };
    let changing = async {
        // After the watches are open.
        tokio::time::sleep(Duration::from_millis(500)).await;
        for change in changes {
            pair.seed(change).await;
        }
    };
    let (events, ()) = tokio::join!(pair.each(open), changing);
    compare(what, events).defaulted_service_accounts((0..pods).map(|i| format!("/{i}/object")))
}

/// A merge patch of `pod`'s labels.
fn relabel(pod: &str, labels: Value) -> Req {
    Req::patch(
        pod_at(pod),
        MERGE_PATCH,
        json!({"metadata": {"labels": labels}}),
    )
}

#[tokio::test]
async fn a_watch_sees_adds_changes_and_deletes_in_order() {
    let changes = vec![
        Req::post(PODS, pod("web-0", "", "web")),
        relabel("web-0", json!({"seen": "yes"})),
        // Unbound: deleted at once, no kubelet needed.
        Req::delete(pod_at("web-0"), None),
    ];
    watch_during("WATCH pods", "", changes, 4).await.same();
}

#[tokio::test]
async fn a_label_selected_watch_sees_an_object_leave_as_a_delete() {
    let changes = vec![
        Req::post(PODS, pod("web-0", "", "web")),
        relabel("web-0", json!({"app": "other"})),
        Req::post(PODS, pod("db-0", "", "db")),
    ];
    let what = "WATCH pods?labelSelector=app=web";
    watch_during(what, "&labelSelector=app%3Dweb", changes, 2)
        .await
        .same();
}

#[tokio::test]
async fn a_field_selected_watch_sees_only_its_node() {
    let changes = vec![
        Req::post(PODS, pod("a-0", "node-a", "web")),
        Req::post(PODS, pod("b-0", "node-b", "web")),
        relabel("a-0", json!({"seen": "yes"})),
    ];
    let what = "WATCH pods?fieldSelector=spec.nodeName=node-a";
    watch_during(what, "&fieldSelector=spec.nodeName%3Dnode-a", changes, 2)
        .await
        .same();
}

/// A watch from a resourceVersion the server no longer has ends with a 410 `Expired` ERROR event.
/// The simulator keeps 5 events per resource here. kube-apiserver 1.36 serves such a watch
/// from its watch cache by replaying the current objects as ADDED events (what this case
/// checks it does), and answers 410 only once its cache window or etcd's compaction has
/// passed a version it must replay from; the 410 body is compared in
/// `lists::a_continue_token_whose_version_is_gone_is_a_410`, and this one is checked against
/// the body the real server's watch cache builds (`too old resource version: <asked>
/// (<oldest>)`).
#[tokio::test]
async fn a_watch_from_a_resource_version_too_old_is_a_410_gone_event() {
    // The simulator keeps 5 events per resource here; the real watch cache starts at the API
    // server's start, long after resourceVersion 1.
    let pair = Pair::start_with(|config| config.history_limit = 5).await;
    for i in 0..8 {
        pair.seed(Req::post(PODS, pod(&format!("p-{i}"), "", "web")))
            .await;
    }
    let from_1 = Req::get(format!("{PODS}?watch=1&timeoutSeconds=2&resourceVersion=1"));
    let (sim, real) = pair.both(from_1).await;
    let expired = json!({"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "reason": "Expired", "code": 410}});
    assert_eq!(sim.code, 200, "a watch answers 200, then the error event");
    let events = sim.body.as_array().cloned().unwrap_or_default();
    assert_eq!(events.len(), 1, "{}", sim.body);
    let mut event = events[0].clone();
    let message = event["object"]
        .as_object_mut()
        .and_then(|o| o.remove("message"))
        .unwrap_or(Value::Null);
    assert_eq!(event, expired);
    assert!(
        message
            .as_str()
            .is_some_and(|m| m.starts_with("too old resource version: 1 (")),
        "{message}"
    );
    // The real server: the current objects, as ADDED events.
    let added: Vec<&str> = real
        .body
        .as_array()
        .map(|events| {
            events
                .iter()
                .filter(|e| e["type"] == "ADDED")
                .filter_map(|e| e["object"]["metadata"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(added.len(), 8, "{}", real.body);
}
