//! Scale: a 2,000-node x 30-pod cluster loads in seconds, objects are realistic in size, and a
//! per-node list or watch touches only that node's pods.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use nmo_sim::{Query, Scenario, SimConfig, Simulator};
use serde_json::json;

use crate::support::relabelled;

#[tokio::test]
async fn two_thousand_nodes_load_quickly_and_node_scoped_reads_stay_small() {
    // The full 2,000 x 30 in release builds; debug builds (tests, ~15x slower) seed 300 x 30.
    let nodes = if cfg!(debug_assertions) { 300 } else { 2000 };
    let t = Instant::now();
    let mut cfg = SimConfig::default().scenario(Scenario::new(nodes, 30));
    cfg.timing.time_scale = 1.0;
    let sim = Simulator::start(cfg).await.unwrap();
    let load = t.elapsed();
    let (objects, bytes) = sim.store().stats();
    eprintln!(
        "{nodes}x30 loaded in {load:?}: {objects} objects, {} MiB of JSON",
        bytes / (1 << 20)
    );
    // How long loading takes is `cargo bench --bench sim`'s figure: a timed assertion would
    // flake on a busy machine.
    // Nodes, 30 pods each, 5 namespaces, 1 DaemonSet, 21 ReplicaSets, 20 PDBs.
    assert_eq!(objects, 31 * nodes + 47);
    let node = sim.get_json("", "nodes", "", "node-7").unwrap();
    let node_len = serde_json::to_vec(&node).unwrap().len();
    assert!(
        (10 * 1024..=16 * 1024).contains(&node_len),
        "node JSON is {node_len} bytes"
    );
    let client = sim.kube_client().unwrap();
    let pods: Api<Pod> = Api::all(client.clone());
    let l = pods
        .list(&ListParams::default().fields("spec.nodeName=node-123"))
        .await
        .unwrap();
    assert_eq!(l.items.len(), 30);
    let pod_len = serde_json::to_vec(&l.items[0]).unwrap().len();
    assert!(pod_len > 2500, "pod JSON is {pod_len} bytes");
    // A watch on one node gets that node's events only, among changes on many nodes.
    let mut w = pods
        .watch(
            &WatchParams::default().fields("spec.nodeName=node-5"),
            &l.metadata.resource_version.unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    let nodes: Api<Node> = Api::all(client);
    for i in 0..20 {
        relabelled(&nodes, &format!("node-{i}"), json!({"t": "1"})).await;
    }
    let target = sim
        .list_json("", "pods", "workloads")
        .into_iter()
        .filter(|p| p["spec"]["nodeName"] == "node-5")
        .find(|p| {
            p["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("standalone")
        })
        .unwrap();
    let other = "standalone-node-6";
    let wp: Api<Pod> = Api::namespaced(sim.kube_client().unwrap(), "workloads");
    relabelled(&wp, other, json!({"t": "1"})).await;
    let tname = target["metadata"]["name"].as_str().unwrap();
    relabelled(&wp, tname, json!({"t": "1"})).await;
    match tokio::time::timeout(Duration::from_secs(5), w.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        WatchEvent::Modified(p) => assert_eq!(p.metadata.name.as_deref(), Some(tname)),
        other => panic!("{other:?}"),
    }
    assert_eq!(sim.requests(&Query::all().verb("patch")), 22);
    sim.shutdown().await;
}
