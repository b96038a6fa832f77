//! Test hooks: request accounting (by verb, resource, subresource, identity; debug endpoint)
//! and fault injection (errors, latency, 409 storms, watches closed early).

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, EvictParams, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use nmo_sim::{ClientOptions, FaultRule, Query, Scenario, SimConfig, Simulator};
use serde_json::json;

use crate::support::{first_listed, patched, raw_get, refused, relabelled, start_plain, status_of};

#[tokio::test]
async fn requests_are_counted_by_verb_resource_and_identity() {
    let cfg = SimConfig::default()
        .scenario(Scenario::plain(2, 2))
        .token("secret-1", "system:serviceaccount:nmo:operator");
    let sim = Simulator::start(cfg).await.unwrap();
    let a = sim
        .kube_client_with(&ClientOptions {
            user_agent: "nmo/1.0".into(),
            ..Default::default()
        })
        .unwrap();
    let b = sim
        .kube_client_with(&ClientOptions {
            user_agent: "other".into(),
            token: Some("secret-1".into()),
            retry: false,
        })
        .unwrap();
    let nodes_a: Api<Node> = Api::all(a.clone());
    nodes_a.get("node-0").await.unwrap();
    nodes_a.get("node-1").await.unwrap();
    nodes_a.list(&ListParams::default()).await.unwrap();
    relabelled(&nodes_a, "node-0", json!({"x": "y"})).await;
    let pods_b: Api<Pod> = Api::namespaced(b.clone(), "workloads");
    let victim = first_listed(&pods_b).await;
    pods_b
        .evict(&victim, &EvictParams::default())
        .await
        .unwrap();
    let mut w = pods_b
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap()
        .boxed();
    let _ = w.next().await;
    assert_eq!(sim.requests(&Query::all().verb("get").resource("nodes")), 2);
    assert_eq!(
        sim.requests(&Query::all().resource("nodes").user_agent("nmo/1.0")),
        4
    );
    assert_eq!(
        sim.requests(&Query::all().verb("patch").resource("nodes")),
        1
    );
    assert_eq!(
        sim.requests(
            &Query::all()
                .verb("create")
                .resource("pods")
                .subresource("eviction")
        ),
        1
    );
    assert_eq!(
        sim.requests(&Query::all().verb("watch").resource("pods")),
        1
    );
    assert_eq!(
        sim.requests(&Query::all().user("system:serviceaccount:nmo:operator")),
        3
    );
    assert_eq!(
        sim.requests(&Query::all().user_agent("nmo/1.0").resource("pods")),
        0
    );
    // Unknown tokens are refused when tokens are configured.
    let c = sim
        .kube_client_with(&ClientOptions {
            token: Some("wrong".into()),
            ..Default::default()
        })
        .unwrap();
    let st = refused(Api::<Node>::all(c).get("node-0")).await;
    assert_eq!(st.code, 401);
    // The debug endpoint.
    let (code, body) = raw_get(&a, "/debug/sim/requests").await;
    assert_eq!(code, 200);
    assert_eq!(body["total"].as_u64().unwrap(), 7);
    assert!(
        body["requests"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["verb"] == "create" && r["subresource"] == "eviction" && r["count"] == 1)
    );
    sim.accounting().reset();
    assert_eq!(sim.requests(&Query::all()), 0);
    sim.shutdown().await;
}

#[tokio::test]
async fn faults_are_injected_per_verb_and_resource() {
    let sim = start_plain(2, 2).await;
    let client = sim.kube_client().unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    // One 503 on GET nodes.
    sim.faults().add(
        FaultRule::on(Some("get"), Some("nodes"))
            .errors(1.0, 503)
            .times(1),
    );
    let st = refused(nodes.get("node-0")).await;
    assert_eq!((st.code, st.reason.as_str()), (503, "ServiceUnavailable"));
    nodes.get("node-0").await.unwrap();
    // Latency on LIST nodes.
    let id = sim
        .faults()
        .add(FaultRule::on(Some("list"), Some("nodes")).latency(Duration::from_millis(200)));
    let t = Instant::now();
    nodes.list(&ListParams::default()).await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(200));
    sim.faults().remove(id);
    // A 409 storm on node patches.
    sim.faults().add(
        FaultRule::on(Some("patch"), Some("nodes"))
            .conflicts(1.0)
            .times(3),
    );
    for _ in 0..3 {
        let st = status_of(
            nodes
                .patch(
                    "node-0",
                    &PatchParams::default(),
                    &Patch::Merge(&json!({"spec": {"unschedulable": true}})),
                )
                .await
                .unwrap_err(),
        );
        assert_eq!((st.code, st.reason.as_str()), (409, "Conflict"));
        assert!(st.message.contains("the object has been modified"));
    }
    patched(
        &nodes,
        "node-0",
        Patch::Merge(json!({"spec": {"unschedulable": true}})),
    )
    .await;
    // Watches closed after 2 events.
    sim.faults()
        .add(FaultRule::on(Some("watch"), Some("pods")).close_watches_after(None, Some(2)));
    let pods: Api<Pod> = Api::all(client);
    let s = pods.watch(&WatchParams::default(), "0").await.unwrap();
    let events: Vec<_> = tokio::time::timeout(Duration::from_secs(5), s.collect::<Vec<_>>())
        .await
        .expect("stream closed early");
    assert_eq!(events.len(), 2);
    assert!(matches!(events[0], Ok(WatchEvent::Added(_))));
    sim.faults().clear();
    sim.shutdown().await;
}

#[tokio::test]
async fn faults_match_one_user_and_latency_can_hit_a_fraction_of_requests() {
    let cfg = SimConfig::default()
        .scenario(Scenario::plain(1, 0))
        .token("token-a", "replica-a")
        .token("token-b", "replica-b");
    let sim = Simulator::start(cfg).await.unwrap();
    let client = |token: &str| {
        sim.kube_client_with(&ClientOptions {
            token: Some(token.into()),
            ..Default::default()
        })
        .unwrap()
    };
    let (a, b): (Api<Node>, Api<Node>) = (Api::all(client("token-a")), Api::all(client("token-b")));
    sim.faults().add(
        FaultRule::on(Some("get"), Some("nodes"))
            .user("replica-a")
            .errors(1.0, 500),
    );
    assert_eq!(refused(a.get("node-0")).await.code, 500);
    b.get("node-0").await.expect("another user is not affected");
    sim.faults().clear();
    // Half the requests are late: some of 40 are, some are not.
    sim.faults().add(
        FaultRule::on(Some("get"), Some("nodes"))
            .latency_sometimes(Duration::from_millis(100), 0.5),
    );
    let mut late = 0;
    for _ in 0..40 {
        let t = Instant::now();
        b.get("node-0").await.unwrap();
        if t.elapsed() >= Duration::from_millis(100) {
            late += 1;
        }
    }
    assert!((1..40).contains(&late), "{late} of 40 late");
    sim.shutdown().await;
}

#[tokio::test]
async fn the_audit_hook_sees_each_request_before_it_takes_effect() {
    use std::sync::{Arc, Mutex};
    let sim = start_plain(1, 0).await;
    /// (verb, name, the node's `spec.unschedulable` just before the request).
    type Seen = Vec<(String, String, Option<bool>)>;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let log = seen.clone();
    sim.set_audit_hook(Some(Arc::new(move |served: &nmo_sim::Served<'_>| {
        // What the node is just before the request changes it.
        let cordoned = served
            .get_json("", "nodes", "", "node-0")
            .and_then(|n| n.pointer("/spec/unschedulable").and_then(|u| u.as_bool()));
        log.lock()
            .unwrap()
            .push((served.key.verb.clone(), served.name.to_string(), cordoned));
    })));
    let nodes: Api<Node> = Api::all(sim.kube_client().unwrap());
    patched(
        &nodes,
        "node-0",
        Patch::Merge(json!({"spec": {"unschedulable": true}})),
    )
    .await;
    sim.set_audit_hook(None);
    nodes.get("node-0").await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen, [("patch".to_string(), "node-0".to_string(), None)]);
    sim.shutdown().await;
}
