//! Registered nodes and the controllers around them: the node lifecycle controller keeps
//! heartbeating nodes Ready and loses the others; ReplicaSets make pods, the scheduler binds
//! them to registered nodes, the disruption controller fills PDBs' status, the garbage
//! collector deletes dependents.

use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use nmo_envtest::{NodeTemplate, unique_name};
use serde_json::json;

use nmo_envtest::testing::eventually;

use crate::support::cluster;

fn ready_status(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|condition| condition.type_ == "Ready")
        .map(|condition| condition.status.clone())
}

/// The node `name` (None if it cannot be read) and whether it has the taint `key`.
async fn node_and_taint(nodes: &Api<Node>, name: &str, key: &str) -> Option<(Node, bool)> {
    let node = nodes.get(name).await.ok()?;
    let tainted = taint_keys(&node).contains(&key.to_string());
    Some((node, tainted))
}

fn taint_keys(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|spec| spec.taints.as_ref())
        .map(|taints| taints.iter().map(|taint| taint.key.clone()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn heartbeating_nodes_stay_ready_and_silent_ones_are_lost() {
    let kept = unique_name("kept");
    let silent = unique_name("silent");
    let registered = cluster()
        .register_node(&kept, &[("role", "worker")])
        .await
        .unwrap();
    assert_eq!(ready_status(&registered).as_deref(), Some("True"));
    // Schedulable at once: without the `not-ready` taint admission puts on every new node.
    assert!(
        taint_keys(&registered).is_empty(),
        "{:?}",
        taint_keys(&registered)
    );
    assert_eq!(registered.metadata.labels.unwrap()["role"], "worker");
    cluster()
        .register(NodeTemplate::new(&silent).without_heartbeat())
        .await
        .unwrap();
    // Registering again is harmless.
    cluster()
        .register_node(&kept, &[("role", "worker")])
        .await
        .unwrap();
    assert!(cluster().live_nodes().contains(&kept));
    assert!(!cluster().live_nodes().contains(&silent));

    let client = cluster().admin_client().unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    // The lifecycle controller runs: within the 10 s grace period plus its 5 s period, the
    // node whose lease nobody renews is Unknown, then tainted unreachable.
    eventually("the silent node is lost", Duration::from_secs(90), || {
        let nodes = nodes.clone();
        let silent = silent.clone();
        async move {
            let unreachable = "node.kubernetes.io/unreachable";
            let (node, unreachable) = node_and_taint(&nodes, &silent, unreachable).await?;
            (ready_status(&node).as_deref() == Some("Unknown") && unreachable).then_some(())
        }
    })
    .await;
    // Meanwhile the heartbeating one, registered at the same time, is still Ready and clean.
    let kept_node = nodes.get(&kept).await.unwrap();
    assert_eq!(ready_status(&kept_node).as_deref(), Some("True"));
    assert!(
        taint_keys(&kept_node).is_empty(),
        "{:?}",
        taint_keys(&kept_node)
    );
    let lease = Api::<Lease>::namespaced(client, "kube-node-lease")
        .get(&kept)
        .await
        .unwrap();
    let renewed = lease.spec.unwrap().renew_time.unwrap().0.as_second();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(now - renewed < 10, "last renewed {} s ago", now - renewed);
}

#[tokio::test]
async fn replicasets_are_scheduled_guarded_by_pdbs_and_collected() {
    let client = cluster().admin_client().unwrap();
    let node = unique_name("worker");
    cluster().register_node(&node, &[]).await.unwrap();
    let namespace = cluster().create_namespace("rs").await.unwrap();

    // Pinned to this test's node, so other tests' nodes do not matter.
    let replica_set: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        },
    }))
    .unwrap();
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), &namespace);
    replica_sets
        .create(&PostParams::default(), &replica_set)
        .await
        .unwrap();
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }))
    .unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &namespace);
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();

    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let bound = eventually("2 pods bound to the node", Duration::from_secs(60), || {
        let pods = pods.clone();
        let node = node.clone();
        async move {
            let list = pods.list(&ListParams::default()).await.ok()?;
            let bound: Vec<Pod> = list
                .items
                .into_iter()
                .filter(|pod| {
                    pod.spec.as_ref().and_then(|spec| spec.node_name.as_deref())
                        == Some(node.as_str())
                })
                .collect();
            (bound.len() == 2).then_some(bound)
        }
    })
    .await;
    assert!(bound.iter().all(|pod| {
        pod.metadata
            .owner_references
            .as_ref()
            .is_some_and(|owners| owners.iter().any(|owner| owner.kind == "ReplicaSet"))
    }));
    // No kubelet: the pods are bound but never ready, so the PDB expects 2 and allows none.
    let status = eventually("the budget's status", Duration::from_secs(60), || {
        let pdbs = pdbs.clone();
        async move {
            let status = pdbs.get("web").await.ok()?.status?;
            (status.expected_pods == 2).then_some(status)
        }
    })
    .await;
    assert_eq!(status.current_healthy, 0);
    assert_eq!(status.disruptions_allowed, 0);

    // Deleting the ReplicaSet in the background leaves its pods to the garbage collector,
    // which deletes them (they stay Terminating: no kubelet confirms they stopped).
    replica_sets
        .delete("web", &DeleteParams::background())
        .await
        .unwrap();
    eventually(
        "the pods are being deleted",
        Duration::from_secs(60),
        || {
            let pods = pods.clone();
            async move {
                let list = pods.list(&ListParams::default()).await.ok()?;
                list.items
                    .iter()
                    .all(|pod| pod.metadata.deletion_timestamp.is_some())
                    .then_some(())
            }
        },
    )
    .await;
}

/// What a real cluster adds when a node is cordoned: the lifecycle controller taints it
/// `node.kubernetes.io/unschedulable:NoSchedule` (nmo adds the same taint itself, and must
/// cope with finding it there) and removes the taint when the node is uncordoned.
#[tokio::test]
async fn a_cordoned_node_is_tainted_unschedulable_by_the_lifecycle_controller() {
    let name = unique_name("cordoned");
    cluster().register_node(&name, &[]).await.unwrap();
    let nodes: Api<Node> = Api::all(cluster().admin_client().unwrap());
    let cordon = |unschedulable: bool| {
        let nodes = nodes.clone();
        let name = name.clone();
        async move {
            let patch = json!({"spec": {"unschedulable": unschedulable}});
            nodes
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    };
    let has_taint = |wanted: bool| {
        let nodes = nodes.clone();
        let name = name.clone();
        move || {
            let nodes = nodes.clone();
            let name = name.clone();
            async move {
                let unschedulable = "node.kubernetes.io/unschedulable";
                let (_, tainted) = node_and_taint(&nodes, &name, unschedulable).await?;
                (tainted == wanted).then_some(())
            }
        }
    };
    for (cordoned, what) in [
        (true, "the unschedulable taint"),
        (false, "the taint removed"),
    ] {
        cordon(cordoned).await;
        eventually(what, Duration::from_secs(60), has_taint(cordoned)).await;
    }
}
