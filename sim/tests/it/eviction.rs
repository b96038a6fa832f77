//! The eviction subresource and the disruption controller's PDB status, through the kube client.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use nmo_sim::{Scenario, SimHandle};
use serde_json::{Value, json};

use nmo_envtest::testing::eventually;

use crate::support::{EVICTED, create_namespace, evicted, eviction_refused, listed, start};

fn pdb(sim: &SimHandle, name: &str) -> Value {
    sim.get_json("policy", "poddisruptionbudgets", "workloads", name)
        .expect("pdb exists")
}

fn add_pdb(sim: &SimHandle, name: &str, spec: Value) {
    let mut s = spec;
    s["selector"] = json!({"matchLabels": {"app": "app-0"}});
    sim.create_json("policy", "poddisruptionbudgets", "workloads",
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name}, "spec": s}), false)
        .unwrap();
}

async fn pod_names(api: &Api<Pod>, labels: &str) -> Vec<String> {
    listed(api, &ListParams::default().labels(labels)).await
}

/// A running pod `name` in `namespace` on `node`, labelled `labels`.
fn running_pod(name: &str, namespace: &str, node: &str, labels: Value) -> Value {
    nmo_sim::scenario::running_pod(
        name,
        namespace,
        node,
        "10.0.0.1",
        labels,
        None,
        nmo_sim::scenario::pod_spec("a", false),
    )
}

#[tokio::test]
async fn eviction_allowed_then_refused_with_the_real_message() {
    // A slow clock: nothing recovers during the test.
    let sim = start(Some(Scenario::plain(3, 1).replicasets(1)), 100.0).await;
    let pods: Api<Pod> = Api::namespaced(sim.kube_client().unwrap(), "workloads");
    let names = pod_names(&pods, "app=app-0").await;
    assert_eq!(names.len(), 3);
    let p = pdb(&sim, "app-0-pdb");
    assert_eq!(p["status"]["disruptionsAllowed"], 1);
    assert_eq!(p["status"]["expectedPods"], 3);
    assert_eq!(evicted(&pods, &names[0]).await, EVICTED);
    let victim = pods.get(&names[0]).await.unwrap();
    assert!(
        victim.metadata.deletion_timestamp.is_some(),
        "deleted gracefully"
    );
    assert_eq!(victim.metadata.deletion_grace_period_seconds, Some(30));
    let p = pdb(&sim, "app-0-pdb");
    assert_eq!(
        p["status"]["disruptionsAllowed"], 0,
        "decremented by the eviction itself"
    );
    // The disruption controller then sees the pod terminating.
    eventually("currentHealthy 2", Duration::from_secs(3), async || {
        pdb(&sim, "app-0-pdb")["status"]["currentHealthy"] == 2
    })
    .await;
    let err = eviction_refused(&pods, &names[1]).await;
    assert_eq!(err.code, 429);
    assert_eq!(err.reason, "TooManyRequests");
    assert_eq!(
        err.message,
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    let causes = err.details.as_ref().unwrap().causes.clone();
    assert_eq!(causes[0].reason, "DisruptionBudget");
    assert_eq!(
        causes[0].message,
        "The disruption budget app-0-pdb needs 2 healthy pods and has 2 currently"
    );
    // Evicting the terminating pod again is fine (no budget check).
    assert_eq!(evicted(&pods, &names[0]).await, EVICTED);
    // A missing pod: 404.
    let err = eviction_refused(&pods, "ghost").await;
    assert_eq!(
        (err.code, err.message.as_str()),
        (404, "pods \"ghost\" not found")
    );
    // Two PDBs for one pod: 500 with the real message.
    add_pdb(&sim, "second", json!({"minAvailable": 1}));
    let err = eviction_refused(&pods, &names[1]).await;
    assert_eq!(err.code, 500);
    assert_eq!(
        err.message,
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn pending_and_unready_pods_follow_the_real_rules() {
    let sim = start(
        Some(
            Scenario::plain(2, 1)
                .replicasets(1)
                .pdb(Some(json!({"minAvailable": 1}))),
        ),
        100.0,
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(sim.kube_client().unwrap(), "workloads");
    // An unready pod covered by the PDB while the budget is met (2 healthy >= 1): evicted
    // without spending the budget.
    let names = pod_names(&pods, "app=app-0").await;
    let mut unready = sim.get_json("", "pods", "workloads", &names[0]).unwrap();
    unready["metadata"] = json!({"name": "unready", "labels": {"app": "app-0"}});
    for c in unready["status"]["conditions"].as_array_mut().unwrap() {
        if c["type"] == "Ready" {
            c["status"] = json!("False");
        }
    }
    sim.create_json("", "pods", "workloads", unready, true)
        .unwrap();
    eventually("expectedPods 3", Duration::from_secs(3), async || {
        pdb(&sim, "app-0-pdb")["status"]["expectedPods"] == 3
    })
    .await;
    assert_eq!(pdb(&sim, "app-0-pdb")["status"]["disruptionsAllowed"], 1);
    assert_eq!(evicted(&pods, "unready").await, EVICTED);
    assert_eq!(
        pdb(&sim, "app-0-pdb")["status"]["disruptionsAllowed"],
        1,
        "budget not spent"
    );
    // Spend the budget, then a Pending pod is still evictable.
    assert_eq!(evicted(&pods, &names[0]).await, EVICTED);
    assert_eq!(eviction_refused(&pods, &names[1]).await.code, 429);
    let pending = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pending", "labels": {"app": "app-0"}},
        "spec": {"schedulerName": "none", "containers": [{"name": "c", "image": "busybox:1"}]}});
    sim.create_json("", "pods", "workloads", pending, false)
        .unwrap();
    assert_eq!(evicted(&pods, "pending").await, EVICTED);
    assert!(
        pods.get_opt("pending").await.unwrap().is_none(),
        "unscheduled pods go at once"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn terminating_namespace_refuses_evictions_with_403() {
    let sim = start(None, 100.0).await;
    let client = sim.kube_client().unwrap();
    create_namespace(&sim, "doomed");
    sim.create_json("", "nodes", "", nmo_sim::scenario::node("n0", 0), true)
        .unwrap();
    let pod = running_pod("p", "doomed", "n0", json!({"a": "b"}));
    sim.create_json("", "pods", "doomed", pod, true).unwrap();
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    nss.delete("doomed", &Default::default()).await.unwrap();
    let ns = nss.get("doomed").await.unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    let pods: Api<Pod> = Api::namespaced(client, "doomed");
    let err = eviction_refused(&pods, "p").await;
    assert_eq!(err.code, 403);
    assert_eq!(
        err.message,
        "pods \"p\" is forbidden: unable to create new content in namespace doomed because it is being terminated"
    );
    let c = &err.details.as_ref().unwrap().causes[0];
    assert_eq!(
        (c.reason.as_str(), c.field.as_str()),
        ("NamespaceTerminating", "metadata.namespace")
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn pdb_status_is_computed_like_the_disruption_controller() {
    let sim = start(Some(Scenario::plain(5, 1).replicasets(1).pdb(None)), 100.0).await;
    add_pdb(&sim, "min-int", json!({"minAvailable": 2}));
    add_pdb(&sim, "min-pct", json!({"minAvailable": "50%"}));
    add_pdb(&sim, "max-pct", json!({"maxUnavailable": "30%"}));
    add_pdb(&sim, "max-int", json!({"maxUnavailable": 0}));
    eventually("a status for max-int", Duration::from_secs(3), async || {
        pdb(&sim, "max-int").get("status").is_some()
    })
    .await;
    let st = |n: &str| {
        let s = pdb(&sim, n)["status"].clone();
        (
            s["expectedPods"].as_i64().unwrap(),
            s["desiredHealthy"].as_i64().unwrap(),
            s["currentHealthy"].as_i64().unwrap(),
            s["disruptionsAllowed"].as_i64().unwrap(),
        )
    };
    eventually(
        "min-int's status (5, 2, 5, 3)",
        Duration::from_secs(3),
        async || match st("min-int") {
            (5, 2, 5, 3) => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    assert_eq!(st("min-pct"), (5, 3, 5, 2), "50% of 5 rounds up to 3");
    assert_eq!(
        st("max-pct"),
        (5, 3, 5, 2),
        "30% of 5 rounds up to 2 unavailable"
    );
    assert_eq!(st("max-int"), (5, 5, 5, 0));
    let p = pdb(&sim, "max-int");
    assert_eq!(
        p["status"]["observedGeneration"],
        p["metadata"]["generation"]
    );
    assert_eq!(p["status"]["conditions"][0]["reason"], "InsufficientPods");
    // A PDB over unmanaged pods with a percentage cannot compute a scale: no disruption allowed.
    sim.create_json("policy", "poddisruptionbudgets", "workloads",
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "orphans"},
               "spec": {"maxUnavailable": "50%", "selector": {"matchLabels": {"none": "x"}}}}), false).unwrap();
    let pod = running_pod("lonely", "workloads", "node-0", json!({"none": "x"}));
    sim.create_json("", "pods", "workloads", pod, true).unwrap();
    eventually("orphans SyncFailed", Duration::from_secs(3), async || {
        pdb(&sim, "orphans")["status"]["conditions"][0]["reason"] == "SyncFailed"
    })
    .await;
    assert_eq!(pdb(&sim, "orphans")["status"]["disruptionsAllowed"], 0);
    sim.shutdown().await;
}
