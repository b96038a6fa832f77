//! The live cluster: kubelet, ReplicaSet controller, scheduler-lite, garbage collection,
//! namespace deletion; a PDB that blocks, then frees up as replacements become Ready.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PostParams};
use nmo_sim::{Scenario, SimHandle};
use serde_json::json;

use nmo_envtest::testing::eventually;

use crate::support::{
    EVICTED, bare_pod, create_namespace, evicted, eviction_refused, listed, patched, refused, start,
};

/// Cordons (or uncordons) `node` with kubectl's strategic merge patch.
async fn cordon(nodes: &Api<Node>, node: &str, unschedulable: bool) {
    let patch = json!({"spec": {"unschedulable": unschedulable}});
    patched(nodes, node, Patch::Strategic(patch)).await;
}

/// Waits until the pod `name` (in `default`) is on `node`.
async fn scheduled_on(sim: &SimHandle, what: &str, name: &str, node: &str) {
    eventually(what, Duration::from_secs(3), async || {
        sim.get_json("", "pods", "default", name)
            .is_some_and(|p| p["spec"]["nodeName"] == node)
    })
    .await;
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test]
async fn pdb_blocks_then_frees_as_replacements_become_ready() {
    let sim = start(Some(Scenario::plain(2, 2).replicasets(1)), 0.02).await;
    let client = sim.kube_client().unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    cordon(&nodes, "node-0", true).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "workloads");
    let on0 = listed(&pods, &ListParams::default().fields("spec.nodeName=node-0")).await;
    assert_eq!(on0.len(), 2);
    assert_eq!(evicted(&pods, &on0[0]).await, EVICTED);
    assert_eq!(eviction_refused(&pods, &on0[1]).await.code, 429);
    // The ReplicaSet replaces the pod, the scheduler avoids the cordoned node, the kubelet makes
    // it Ready, the PDB frees up.
    eventually("the PDB to free up", Duration::from_secs(5), async || {
        pods.evict(&on0[1], &EvictParams::default()).await.is_ok()
    })
    .await;
    // Replacements (seeded pods have no generateName) are owned by the ReplicaSet, land on the
    // schedulable node and become Ready.
    let replacements = || {
        sim.list_json("", "pods", "workloads")
            .into_iter()
            .filter(|p| {
                p["metadata"]["generateName"]
                    .as_str()
                    .is_some_and(|g| g.starts_with("app-0-"))
                    && p["metadata"]["deletionTimestamp"].is_null()
            })
            .collect::<Vec<_>>()
    };
    eventually(
        "two replacements Running on node-1",
        Duration::from_secs(5),
        async || {
            let r = replacements();
            let done = r.len() == 2
                && r.iter().all(|p| {
                    p["spec"]["nodeName"] == "node-1" && p["status"]["phase"] == "Running"
                });
            if done { Ok(()) } else { Err(format!("{r:?}")) }
        },
    )
    .await;
    let all = pods
        .list(&ListParams::default().labels("app=app-0"))
        .await
        .unwrap()
        .items;
    let replacement = all
        .iter()
        .find(|p| p.metadata.generate_name.is_some() && p.metadata.deletion_timestamp.is_none())
        .expect("a replacement");
    assert_eq!(
        replacement.metadata.owner_references.as_ref().unwrap()[0].kind,
        "ReplicaSet"
    );
    assert!(ready(replacement));
    // Terminating pods go away after their (scaled) grace period.
    eventually(
        "the terminating pod to go",
        Duration::from_secs(5),
        async || sim.get_json("", "pods", "workloads", &on0[0]).is_none(),
    )
    .await;
    sim.shutdown().await;
}

#[tokio::test]
async fn scheduler_respects_cordons_taints_and_tolerations() {
    let sim = start(Some(Scenario::plain(2, 0)), 0.0).await;
    let client = sim.kube_client().unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let taints = json!({"spec": {"taints": [{"key": "medik8s.io/drain", "effect": "NoSchedule"}]}});
    patched(&nodes, "node-1", Patch::Strategic(taints)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mk = |name: &str, tol: bool| -> Pod {
        let mut p = bare_pod(name);
        if tol {
            p["spec"]["tolerations"] = json!([{"key": "medik8s.io/drain", "operator": "Exists"}]);
            p["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": "node-1"});
        }
        serde_json::from_value(p).unwrap()
    };
    for i in 0..4 {
        pods.create(&PostParams::default(), &mk(&format!("plain-{i}"), false))
            .await
            .unwrap();
    }
    pods.create(&PostParams::default(), &mk("tolerant", true))
        .await
        .unwrap();
    let node_of = |n: &str| {
        sim.get_json("", "pods", "default", n)
            .and_then(|p| p["spec"]["nodeName"].as_str().map(String::from))
    };
    eventually(
        "the plain pods to be scheduled",
        Duration::from_secs(3),
        async || (0..4).all(|i| node_of(&format!("plain-{i}")).is_some()),
    )
    .await;
    assert!((0..4).all(|i| node_of(&format!("plain-{i}")).as_deref() == Some("node-0")));
    scheduled_on(&sim, "the tolerant pod on node-1", "tolerant", "node-1").await;
    // Nowhere to go: Pending with PodScheduled=False, until a node is schedulable again.
    cordon(&nodes, "node-0", true).await;
    pods.create(&PostParams::default(), &mk("stuck", false))
        .await
        .unwrap();
    let unschedulable = || {
        sim.get_json("", "pods", "default", "stuck")
            .is_some_and(|p| {
                p["status"]["conditions"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["reason"] == "Unschedulable"))
            })
    };
    eventually(
        "the pod to be Unschedulable",
        Duration::from_secs(3),
        async || unschedulable(),
    )
    .await;
    cordon(&nodes, "node-0", false).await;
    scheduled_on(&sim, "the stuck pod on node-0", "stuck", "node-0").await;
    eventually("the stuck pod to run", Duration::from_secs(3), async || {
        sim.get_json("", "pods", "default", "stuck")
            .is_some_and(|p| p["status"]["phase"] == "Running")
    })
    .await;
    sim.shutdown().await;
}

#[tokio::test]
async fn garbage_collection_and_namespace_deletion() {
    let sim = start(Some(Scenario::plain(1, 3)), 0.01).await;
    let client = sim.kube_client().unwrap();
    let node = sim.get_json("", "nodes", "", "node-0").unwrap();
    create_namespace(&sim, "medik8s-leases");
    sim.create_json("coordination.k8s.io", "leases", "medik8s-leases", json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "node-node-0", "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node-0", "uid": node["metadata"]["uid"]}]},
        "spec": {"holderIdentity": "node-maintenance", "leaseDurationSeconds": 3600}}), false).unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .delete("node-0", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the lease to be garbage collected with its node",
        Duration::from_secs(3),
        async || {
            sim.get_json(
                "coordination.k8s.io",
                "leases",
                "medik8s-leases",
                "node-node-0",
            )
            .is_none()
        },
    )
    .await;
    let nss: Api<Namespace> = Api::all(client);
    nss.delete("workloads", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        nss.get("workloads")
            .await
            .unwrap()
            .status
            .unwrap()
            .phase
            .as_deref(),
        Some("Terminating")
    );
    let late: Pod = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "late"},
               "spec": {"containers": [{"name": "c", "image": "x:1"}]}}),
    )
    .unwrap();
    let workloads = Api::<Pod>::namespaced(sim.kube_client().unwrap(), "workloads");
    let st = refused(workloads.create(&PostParams::default(), &late)).await;
    assert_eq!(st.code, 403);
    eventually("the namespace to go", Duration::from_secs(10), async || {
        sim.get_json("", "namespaces", "", "workloads").is_none()
    })
    .await;
    assert!(sim.list_json("", "pods", "workloads").is_empty());
    sim.shutdown().await;
}

#[tokio::test]
async fn daemonsets_keep_a_pod_per_node_and_deletion_propagation_is_honoured() {
    let sim = start(
        Some(Scenario::plain(2, 4).replicasets(1).daemonsets(1)),
        0.0,
    )
    .await;
    let client = sim.kube_client().unwrap();
    let ds_pods = || {
        sim.list_json("", "pods", "kube-system")
            .into_iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .map(|p| {
                p["spec"]["nodeName"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(ds_pods().len(), 2);
    // A deleted daemon pod is replaced on its node; a new node gets one.
    let sys: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let victim = sim.names("", "pods", "kube-system")[0].clone();
    let node =
        sim.get_json("", "pods", "kube-system", &victim).unwrap()["spec"]["nodeName"].clone();
    sys.delete(&victim, &DeleteParams::default()).await.unwrap();
    sim.create_json("", "nodes", "", nmo_sim::scenario::node("node-9", 9), true)
        .unwrap();
    eventually(
        "a daemon pod on node-9 and the victim's node",
        // Generous: the controllers run every few hundred ms, but a loaded CI machine once
        // took longer than 5 s.
        Duration::from_secs(20),
        async || {
            let p = ds_pods();
            let done = p.len() == 3
                && p.iter().any(|n| n == "node-9")
                && p.iter().any(|n| json!(n) == node);
            if done { Ok(()) } else { Err(format!("{p:?}")) }
        },
    )
    .await;
    // Orphan: the DaemonSet goes, its pods stay without owner.
    let ds: Api<k8s_openapi::api::apps::v1::DaemonSet> =
        Api::namespaced(client.clone(), "kube-system");
    ds.delete("node-agent-0", &DeleteParams::orphan())
        .await
        .unwrap();
    assert!(ds.get_opt("node-agent-0").await.unwrap().is_none());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let left = sim.list_json("", "pods", "kube-system");
    assert_eq!(left.len(), 3);
    assert!(
        left.iter()
            .all(|p| p["metadata"]["ownerReferences"].is_null())
    );
    // Foreground: the ReplicaSet waits (finalizer) until its pods are gone.
    let rss: Api<k8s_openapi::api::apps::v1::ReplicaSet> =
        Api::namespaced(client.clone(), "workloads");
    let rs = sim.names("apps", "replicasets", "workloads")[0].clone();
    let r = rss.delete(&rs, &DeleteParams::foreground()).await.unwrap();
    let held = r
        .left()
        .expect("the ReplicaSet is returned while its pods go");
    assert!(
        held.metadata
            .finalizers
            .unwrap()
            .contains(&"foregroundDeletion".to_string())
    );
    eventually(
        "the ReplicaSet to go after its pods",
        Duration::from_secs(5),
        async || match sim.get_json("apps", "replicasets", "workloads", &rs) {
            None => Ok(()),
            Some(held) => Err(format!("{held:?} {:?}", sim.names("", "pods", "workloads"))),
        },
    )
    .await;
    assert!(sim.list_json("", "pods", "workloads").is_empty());
    sim.shutdown().await;
}
