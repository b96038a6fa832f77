//! PATCH flavours: JSON patch (a failed `test` is a 422 and changes nothing), merge patch,
//! strategic merge patch (lists merged by key where the real server does), server-side apply.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::support::{first_listed, patched, raw, refused, start};

#[tokio::test]
async fn json_patch_test_failure_is_422_and_changes_nothing() {
    let sim = start(Some(nmo_sim::Scenario::plain(1, 1)), 0.0).await;
    let nodes: Api<Node> = Api::all(sim.kube_client().unwrap());
    let before = nodes.get("node-0").await.unwrap();
    let p: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/spec/taints", "value": [{"key": "x", "effect": "NoSchedule"}]},
        {"op": "add", "path": "/spec/taints", "value": [{"key": "medik8s.io/drain", "effect": "NoSchedule"}]}
    ]))
    .unwrap();
    let st = refused(nodes.patch("node-0", &PatchParams::default(), &Patch::<()>::Json(p))).await;
    assert_eq!(st.code, 422);
    assert_eq!(st.reason, "Invalid");
    // As kube-apiserver answers (the fidelity suite compares the two): a generic message and
    // empty details; which op failed is not said.
    assert_eq!(
        st.message,
        "the server rejected our request due to an error in our request"
    );
    assert!(
        st.details.as_ref().is_none_or(|d| d.causes.is_empty()),
        "{:?}",
        st.details
    );
    let after = nodes.get("node-0").await.unwrap();
    assert_eq!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );
    // A test for null passes on a missing path (the Go json-patch semantics kube-runtime's
    // finalizer helper relies on), and the patch applies.
    let p: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/f"]},
        {"op": "test", "path": "/spec/unschedulable", "value": null},
        {"op": "add", "path": "/spec/taints", "value": [{"key": "medik8s.io/drain", "effect": "NoSchedule"}]}
    ]))
    .unwrap();
    let n = nodes
        .patch("node-0", &PatchParams::default(), &Patch::<()>::Json(p))
        .await
        .unwrap();
    assert_eq!(
        n.metadata.finalizers.unwrap(),
        vec!["example.com/f".to_string()]
    );
    assert_eq!(n.spec.unwrap().taints.unwrap()[0].key, "medik8s.io/drain");
    // A test for null on a present value fails.
    let p: json_patch::Patch = serde_json::from_value(
        json!([{"op": "test", "path": "/metadata/finalizers", "value": null}]),
    )
    .unwrap();
    assert_eq!(
        refused(nodes.patch("node-0", &PatchParams::default(), &Patch::<()>::Json(p)))
            .await
            .code,
        422
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn strategic_merge_merges_by_key_and_replaces_atomic_lists() {
    let sim = start(Some(nmo_sim::Scenario::plain(1, 1)), 0.0).await;
    let client = sim.kube_client().unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let p = json!({"metadata": {"labels": {"remediation.medik8s.io/exclude-from-remediation": "true"}},
                   "spec": {"unschedulable": true, "taints": [{"key": "a", "effect": "NoSchedule"}]}});
    patched(&nodes, "node-0", Patch::Strategic(p)).await;
    let p = json!({"spec": {"taints": [{"key": "b", "effect": "NoSchedule"}]},
                   "status": {"conditions": [{"type": "Ready", "status": "False"}]}});
    let n = patched(&nodes, "node-0", Patch::Strategic(p)).await;
    let spec = n.spec.unwrap();
    assert_eq!(spec.unschedulable, Some(true));
    let taints = spec.taints.unwrap();
    assert_eq!(taints.len(), 1, "taints are atomic");
    assert_eq!(taints[0].key, "b");
    // Status is not written through the main resource.
    let conds = n.status.unwrap().conditions.unwrap();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );
    assert_eq!(
        n.metadata.labels.unwrap()["remediation.medik8s.io/exclude-from-remediation"],
        "true"
    );
    // Through the status subresource, conditions merge by type.
    let n = nodes
        .patch_status(
            "node-0",
            &PatchParams::default(),
            &Patch::Strategic(
                &json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
            ),
        )
        .await
        .unwrap();
    let conds = n.status.unwrap().conditions.unwrap();
    assert_eq!(conds.len(), 4);
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "False")
    );
    // Containers merge by name.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "workloads");
    let name = first_listed(&pods).await;
    let app = pods.get(&name).await.unwrap().spec.unwrap().containers[0]
        .name
        .clone();
    let p = json!({"spec": {"containers": [{"name": app, "image": "x:2"}]}, "metadata": {"annotations": {"a": "b"}}});
    let pod = patched(&pods, &name, Patch::Strategic(p)).await;
    let c = &pod.spec.unwrap().containers;
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].image.as_deref(), Some("x:2"));
    assert!(
        c[0].readiness_probe.is_some(),
        "other container fields kept"
    );
    // Custom resources do not support strategic merge: 415.
    let empty_patch =
        |path, content_type| raw(&client, "PATCH", path, Some(content_type), Some(json!({})));
    let nm = "/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances/x";
    let (code, body) = empty_patch(nm, "application/strategic-merge-patch+json").await;
    assert_eq!(code, 415, "{body}");
    assert_eq!(body["reason"], "UnsupportedMediaType");
    // Unknown patch types: 415.
    let (code, _) = empty_patch("/api/v1/nodes/node-0", "text/plain").await;
    assert_eq!(code, 415);
    sim.shutdown().await;
}

#[tokio::test]
async fn merge_patch_and_server_side_apply() {
    let sim = start(None, 0.0).await;
    let client = sim.kube_client().unwrap();
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(client, "default");
    let applied = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "ssa"},
                         "spec": {"holderIdentity": "me", "leaseDurationSeconds": 10}});
    let pp = PatchParams::apply("nmo-test");
    let l = leases
        .patch("ssa", &pp, &Patch::Apply(&applied))
        .await
        .unwrap();
    assert_eq!(l.spec.unwrap().holder_identity.as_deref(), Some("me"));
    let applied = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "ssa"},
                         "spec": {"holderIdentity": "you"}});
    let l = leases
        .patch("ssa", &pp, &Patch::Apply(&applied))
        .await
        .unwrap();
    let spec = l.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("you"));
    let l = patched(
        &leases,
        "ssa",
        Patch::Merge(json!({"spec": {"leaseDurationSeconds": null}})),
    )
    .await;
    assert_eq!(l.spec.unwrap().lease_duration_seconds, None);
    sim.shutdown().await;
}

#[tokio::test]
async fn kube_runtime_finalizer_helper_works() {
    use kube::runtime::controller::Action;
    use kube::runtime::finalizer::{Event, finalizer};
    use std::sync::Arc;
    let sim = start(None, 0.0).await;
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(sim.kube_client().unwrap(), "default");
    let l: k8s_openapi::api::coordination::v1::Lease =
        serde_json::from_value(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "fin"}})).unwrap();
    leases.create(&Default::default(), &l).await.unwrap();
    let run = |obj| {
        let leases = leases.clone();
        async move {
            finalizer(
                &leases,
                "example.com/cleanup",
                Arc::new(obj),
                |ev| async move {
                    Ok::<_, std::convert::Infallible>(match ev {
                        Event::Apply(_) => Action::await_change(),
                        Event::Cleanup(_) => Action::await_change(),
                    })
                },
            )
            .await
        }
    };
    run(leases.get("fin").await.unwrap()).await.unwrap();
    let got = leases.get("fin").await.unwrap();
    assert_eq!(
        got.metadata.finalizers.clone().unwrap(),
        vec!["example.com/cleanup".to_string()]
    );
    leases.delete("fin", &Default::default()).await.unwrap();
    let deleting = leases.get("fin").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    run(deleting).await.unwrap();
    assert!(
        leases.get_opt("fin").await.unwrap().is_none(),
        "removing the finalizer completes the deletion"
    );
    sim.shutdown().await;
}
