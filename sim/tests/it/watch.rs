//! WATCH: kube-runtime watchers, history replay, 410 Expired as an ERROR event, bookmarks,
//! sendInitialEvents, objects leaving a selector, per-node indexed watches.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use nmo_sim::{Scenario, SimConfig, Simulator};
use serde_json::json;

use crate::support::{relabelled, start};

async fn next_event<S: futures::Stream<Item = Result<WatchEvent<Pod>, kube::Error>> + Unpin>(
    s: &mut S,
) -> WatchEvent<Pod> {
    tokio::time::timeout(Duration::from_secs(5), s.next())
        .await
        .expect("an event in time")
        .expect("stream open")
        .expect("no error")
}

/// A watch of everything `pods` covers from `version`.
async fn watch_from(
    pods: &Api<Pod>,
    version: &str,
) -> futures::stream::BoxStream<'static, kube::Result<WatchEvent<Pod>>> {
    pods.watch(&WatchParams::default(), version)
        .await
        .unwrap()
        .boxed()
}

/// What a kube-runtime watcher applies of its initial list, up to its `InitDone`.
async fn initial_objects<S>(stream: &mut S) -> Vec<Pod>
where
    S: futures::Stream<Item = Result<watcher::Event<Pod>, watcher::Error>> + Unpin,
{
    let mut init = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(5), stream.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            watcher::Event::InitApply(p) => init.push(p),
            watcher::Event::InitDone => return init,
            _ => {}
        }
    }
}

#[tokio::test]
async fn per_node_watcher_sees_only_its_node() {
    let sim = start(Some(Scenario::plain(3, 4)), 0.0).await;
    let pods: Api<Pod> = Api::all(sim.kube_client().unwrap());
    let cfg = watcher::Config::default().fields("spec.nodeName=node-1");
    let mut stream = watcher(pods.clone(), cfg).boxed();
    // Initial list: Init, 4 InitApply, InitDone.
    let init = initial_objects(&mut stream).await;
    for p in &init {
        assert_eq!(
            p.spec.as_ref().unwrap().node_name.as_deref(),
            Some("node-1")
        );
    }
    assert_eq!(init.len(), 4);
    // A pod of another node changes: nothing; a pod of node-1 is deleted: Delete.
    let first_on = |node: &str| {
        let pods = pods.clone();
        let on_node = ListParams::default().fields(&format!("spec.nodeName={node}"));
        async move { pods.list(&on_node).await.unwrap().items[0].clone() }
    };
    let other = first_on("node-2").await;
    let ns = other.metadata.namespace.clone().unwrap();
    let nsapi: Api<Pod> = Api::namespaced(sim.kube_client().unwrap(), &ns);
    relabelled(
        &nsapi,
        other.metadata.name.as_deref().unwrap(),
        json!({"x": "y"}),
    )
    .await;
    let mine = first_on("node-1").await;
    let name = mine.metadata.name.clone().unwrap();
    nsapi.delete(&name, &DeleteParams::default()).await.unwrap();
    let mut saw_delete = false;
    while let Ok(Ok(Some(ev))) =
        tokio::time::timeout(Duration::from_secs(3), stream.try_next()).await
    {
        match ev {
            watcher::Event::Apply(p) => {
                assert_eq!(
                    p.spec.unwrap().node_name.as_deref(),
                    Some("node-1"),
                    "only node-1 pods"
                );
            }
            watcher::Event::Delete(p) => {
                assert_eq!(p.metadata.name.as_deref(), Some(name.as_str()));
                saw_delete = true;
                break;
            }
            _ => {}
        }
    }
    assert!(saw_delete);
    // The watch registered on the node index.
    assert!(sim.store().watcher_count() >= 1);
    sim.shutdown().await;
}

#[tokio::test]
async fn expired_resource_version_is_a_410_error_event() {
    let cfg = SimConfig {
        history_limit: 5,
        scenario: Some(Scenario::plain(1, 1)),
        ..Default::default()
    };
    let sim = Simulator::start(cfg).await.unwrap();
    let client = sim.kube_client().unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "workloads");
    let list = pods.list(&ListParams::default()).await.unwrap();
    let start_rv = list.metadata.resource_version.clone().unwrap();
    let name = list.items[0].metadata.name.clone().unwrap();
    for i in 0..10 {
        relabelled(&pods, &name, json!({"i": i.to_string()})).await;
    }
    let mut s = watch_from(&pods, &start_rv).await;
    match next_event(&mut s).await {
        WatchEvent::Error(st) => {
            assert_eq!(st.code, 410);
            assert_eq!(st.reason, "Expired");
            assert!(
                st.message.starts_with("too old resource version:"),
                "{}",
                st.message
            );
        }
        other => panic!("expected an ERROR event, got {other:?}"),
    }
    // A recent version replays only what came after it.
    let rv = pods
        .get(&name)
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    relabelled(&pods, &name, json!({"i": "last"})).await;
    let mut s = watch_from(&pods, &rv).await;
    match next_event(&mut s).await {
        WatchEvent::Modified(p) => assert_eq!(p.metadata.labels.unwrap()["i"], "last"),
        other => panic!("expected MODIFIED, got {other:?}"),
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn bookmarks_initial_events_and_leaving_a_selector() {
    let sim = start(Some(Scenario::plain(1, 3)), 0.0).await;
    let pods: Api<Pod> = Api::namespaced(sim.kube_client().unwrap(), "workloads");
    let name = pods.list(&ListParams::default()).await.unwrap().items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    relabelled(&pods, &name, json!({"watched": "yes"})).await;
    // sendInitialEvents: ADDED for the current state, then a bookmark marking the end.
    let wp = WatchParams::default()
        .labels("watched=yes")
        .initial_events();
    let mut s = pods.watch(&wp, "").await.unwrap().boxed();
    match next_event(&mut s).await {
        WatchEvent::Added(p) => assert_eq!(p.metadata.name.as_deref(), Some(name.as_str())),
        other => panic!("expected ADDED, got {other:?}"),
    }
    match next_event(&mut s).await {
        WatchEvent::Bookmark(b) => {
            assert_eq!(
                b.metadata
                    .annotations
                    .get("k8s.io/initial-events-end")
                    .map(|s| s.as_str()),
                Some("true")
            );
        }
        other => panic!("expected the initial-events-end BOOKMARK, got {other:?}"),
    }
    // Periodic bookmarks carry the latest resourceVersion.
    match next_event(&mut s).await {
        WatchEvent::Bookmark(b) => assert!(!b.metadata.resource_version.is_empty()),
        other => panic!("expected a BOOKMARK, got {other:?}"),
    }
    // The object stops matching: DELETED.
    relabelled(&pods, &name, json!({"watched": "no"})).await;
    loop {
        match next_event(&mut s).await {
            WatchEvent::Deleted(p) => {
                assert_eq!(p.metadata.name.as_deref(), Some(name.as_str()));
                break;
            }
            WatchEvent::Bookmark(_) => continue,
            other => panic!("expected DELETED, got {other:?}"),
        }
    }
    // The streaming-list watcher of kube-runtime works too.
    let cfg = watcher::Config::default()
        .streaming_lists()
        .labels("pod-template-hash");
    let mut w = watcher(pods.clone(), cfg).boxed();
    assert_eq!(initial_objects(&mut w).await.len(), 3);
    sim.shutdown().await;
}

#[tokio::test]
async fn table_watches_send_one_row_tables() {
    let sim = start(Some(Scenario::plain(1, 2)), 0.0).await;
    let client = sim.kube_client().unwrap();
    let req = http::Request::builder()
        .uri("/api/v1/namespaces/workloads/pods?watch=1&timeoutSeconds=1")
        .header(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let body = resp.into_body().collect_bytes().await.unwrap();
    let lines: Vec<serde_json::Value> = body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for l in &lines {
        assert_eq!(l["type"], "ADDED");
        assert_eq!(l["object"]["kind"], "Table");
        assert_eq!(l["object"]["rows"].as_array().unwrap().len(), 1);
        assert_eq!(l["object"]["rows"][0]["cells"][2], "Running");
    }
    sim.shutdown().await;
}

/// A restart of the API server as its clients see it: the open watch ends with its connection,
/// every request during the outage is answered 503, and afterwards a watch resumed from the
/// old resourceVersion ends with 410 Expired while a fresh list and watch from its version are
/// served as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_drops_connections_answers_503_then_expires_resumed_watches() {
    let sim = start(Some(Scenario::plain(1, 2)), 0.0).await;
    let pods: Api<Pod> = Api::all(sim.kube_client().unwrap());
    let listed = pods.list(&ListParams::default()).await.unwrap();
    let old = listed.metadata.resource_version.clone().unwrap();
    let mut open = watch_from(&pods, &old).await;

    let restart = sim.restart_api_server(Duration::from_secs(1));
    let during = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let ended = tokio::time::timeout(Duration::from_secs(1), open.next()).await;
        assert!(
            matches!(ended, Ok(None | Some(Err(_)))),
            "the watch outlived its connection: {ended:?}"
        );
        let refused = pods.list(&ListParams::default()).await;
        assert!(
            matches!(&refused, Err(kube::Error::Api(status)) if status.code == 503),
            "{refused:?}"
        );
    };
    let (dropped, ()) = tokio::join!(restart, during);
    assert!(dropped >= 1, "the watch's connection was dropped");

    let mut resumed = watch_from(&pods, &old).await;
    match next_event(&mut resumed).await {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"))
        }
        other => panic!("a resumed watch was served: {other:?}"),
    }
    let fresh = pods.list(&ListParams::default()).await.unwrap();
    let version = fresh.metadata.resource_version.unwrap();
    assert_ne!(version, old);
    let mut watching = watch_from(&pods, &version).await;
    let pod = &fresh.items[0];
    Api::<Pod>::namespaced(
        sim.kube_client().unwrap(),
        pod.metadata.namespace.as_deref().unwrap(),
    )
    .patch(
        pod.metadata.name.as_deref().unwrap(),
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
    )
    .await
    .unwrap();
    assert!(matches!(
        next_event(&mut watching).await,
        WatchEvent::Modified(_)
    ));
}
