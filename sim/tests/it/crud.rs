//! CRUD semantics through the unmodified kube client: names, uids, optimistic concurrency,
//! status subresource masking, generation, deletion, finalizers, Status bodies, selectors,
//! pagination.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support::{nm_crd, raw, raw_get, refused, relabelled, start};

fn lease(name: &str) -> Lease {
    serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name},
        "spec": {"holderIdentity": "node-maintenance", "leaseDurationSeconds": 3600}
    }))
    .unwrap()
}

#[tokio::test]
async fn create_assigns_metadata_and_conflicts_like_the_real_server() {
    let sim = start(None, 0.0).await;
    let client = sim.kube_client().unwrap();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let l = leases
        .create(&PostParams::default(), &lease("node-a"))
        .await
        .unwrap();
    let m = &l.metadata;
    assert_eq!(m.uid.as_ref().unwrap().len(), 36);
    assert!(m.creation_timestamp.is_some());
    assert!(m.resource_version.as_ref().unwrap().parse::<u64>().unwrap() > 0);
    assert_eq!(m.namespace.as_deref(), Some("default"));

    let st = refused(leases.create(&PostParams::default(), &lease("node-a"))).await;
    assert_eq!(st.code, 409);
    assert_eq!(st.reason, "AlreadyExists");
    assert_eq!(
        st.message,
        "leases.coordination.k8s.io \"node-a\" already exists"
    );

    // generateName.
    let mut g = lease("");
    g.metadata.name = None;
    g.metadata.generate_name = Some("gen-".into());
    let made = leases.create(&PostParams::default(), &g).await.unwrap();
    let n = made.metadata.name.unwrap();
    assert!(n.starts_with("gen-") && n.len() == 9, "{n}");

    // Missing name: 422 with the real message.
    let st = refused(leases.create(&PostParams::default(), &lease(""))).await;
    assert_eq!(st.code, 422);
    assert_eq!(st.reason, "Invalid");
    assert!(
        st.message
            .contains("metadata.name: Required value: name or generateName is required"),
        "{}",
        st.message
    );

    // Missing namespace.
    let other: Api<Lease> = Api::namespaced(client.clone(), "nope");
    let st = refused(other.create(&PostParams::default(), &lease("x"))).await;
    assert_eq!(
        (st.code, st.message.as_str()),
        (404, "namespaces \"nope\" not found")
    );

    // GET of a missing object: a real Status body.
    let (code, body) = raw_get(&client, "/api/v1/namespaces/default/pods/ghost").await;
    assert_eq!(code, 404);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "pods \"ghost\" not found", "reason": "NotFound",
               "details": {"name": "ghost", "kind": "pods"}, "code": 404})
    );
    // An unknown resource.
    let (code, body) = raw_get(&client, "/api/v1/widgets").await;
    assert_eq!((code, body["reason"].as_str()), (404, Some("NotFound")));
    sim.shutdown().await;
}

#[tokio::test]
async fn update_with_stale_resource_version_is_a_409() {
    let sim = start(None, 0.0).await;
    let leases: Api<Lease> = Api::namespaced(sim.kube_client().unwrap(), "default");
    let l = leases
        .create(&PostParams::default(), &lease("l1"))
        .await
        .unwrap();
    let mut a = l.clone();
    a.spec.as_mut().unwrap().holder_identity = Some("a".into());
    let a2 = leases
        .replace("l1", &PostParams::default(), &a)
        .await
        .unwrap();
    assert_ne!(a2.metadata.resource_version, l.metadata.resource_version);
    // Writing again from the old version fails.
    let st = refused(leases.replace("l1", &PostParams::default(), &a)).await;
    assert_eq!(st.code, 409);
    assert_eq!(st.reason, "Conflict");
    assert_eq!(
        st.message,
        "Operation cannot be fulfilled on leases.coordination.k8s.io \"l1\": the object has been modified; please apply your changes to the latest version and try again"
    );
    // A no-op update does not bump the resourceVersion.
    let same = leases
        .replace("l1", &PostParams::default(), &a2)
        .await
        .unwrap();
    assert_eq!(same.metadata.resource_version, a2.metadata.resource_version);
    sim.shutdown().await;
}

#[tokio::test]
async fn status_subresource_masks_spec_and_main_resource_masks_status() {
    let sim = start(None, 0.0).await;
    let client = sim.kube_client().unwrap();
    let (code, _) = raw(&client, "POST", "/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances", Some("application/json"),
        Some(json!({"apiVersion": "nodemaintenance.medik8s.io/v1beta1", "kind": "NodeMaintenance",
                    "metadata": {"name": "nm1"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Bogus"}}))).await;
    assert_eq!(code, 201);
    let nm = sim
        .get_json("nodemaintenance.medik8s.io", "nodemaintenances", "", "nm1")
        .unwrap();
    assert!(nm.get("status").is_none(), "status dropped on create: {nm}");
    assert_eq!(nm["metadata"]["generation"], 1);
    let base = "/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances/nm1";
    // Status patch ignores spec changes.
    let (code, body) = raw(&client, "PATCH", &format!("{base}/status"), Some("application/merge-patch+json"),
        Some(json!({"spec": {"nodeName": "other"}, "status": {"phase": "Running", "totalpods": 3, "junk": 1}}))).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["spec"]["nodeName"], "n1");
    assert_eq!(body["status"]["phase"], "Running");
    assert!(
        body["status"].get("junk").is_none(),
        "unknown fields are pruned"
    );
    assert_eq!(body["metadata"]["generation"], 1);
    // Main resource patch ignores status changes, bumps generation on spec changes.
    let (code, body) = raw(
        &client,
        "PATCH",
        base,
        Some("application/merge-patch+json"),
        Some(json!({"spec": {"reason": "r"}, "status": {"phase": "Failed"}})),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(body["status"]["phase"], "Running");
    assert_eq!(body["spec"]["reason"], "r");
    assert_eq!(body["metadata"]["generation"], 2);
    // Required fields are enforced; the CRD's rules are not checked past a missing field, as
    // the real API server says.
    let (code, body) = raw(
        &client,
        "POST",
        "/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances",
        Some("application/json"),
        Some(
            json!({"apiVersion": "nodemaintenance.medik8s.io/v1beta1", "kind": "NodeMaintenance",
                    "metadata": {"name": "nm2"}, "spec": {}}),
        ),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "NodeMaintenance.nodemaintenance.medik8s.io \"nm2\" is invalid: [spec.nodeName: Required \
         value, <nil>: Invalid value: null: some validation rules were not checked because the \
         object was invalid; correct the existing errors to complete validation]"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let sim = start(None, 0.0).await;
    let client = sim.kube_client().unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    // ConfigMaps are not served: explicit 404, never a silent success.
    assert_eq!(refused(cms.list(&ListParams::default())).await.code, 404);
    let leases: Api<Lease> = Api::namespaced(client, "default");
    let mut l = lease("fin");
    l.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    leases.create(&PostParams::default(), &l).await.unwrap();
    let r = leases
        .delete("fin", &DeleteParams::default())
        .await
        .unwrap();
    let held = r.left().expect("object returned while finalizers remain");
    assert!(held.metadata.deletion_timestamp.is_some());
    // Adding a finalizer now is refused.
    let p = json!({"metadata": {"finalizers": ["example.com/keep", "example.com/new"]}});
    let st = refused(leases.patch("fin", &PatchParams::default(), &Patch::Merge(&p))).await;
    assert_eq!(st.code, 422);
    // Removing the last finalizer deletes it.
    let p = json!([{"op": "remove", "path": "/metadata/finalizers"}]);
    let jp: json_patch::Patch = serde_json::from_value(p).unwrap();
    leases
        .patch("fin", &PatchParams::default(), &Patch::<()>::Json(jp))
        .await
        .unwrap();
    assert!(leases.get_opt("fin").await.unwrap().is_none());
    sim.shutdown().await;
}

#[tokio::test]
async fn pods_are_deleted_gracefully_and_unscheduled_ones_immediately() {
    let sim = start(Some(nmo_sim::Scenario::plain(1, 2)), 0.0).await;
    let client = sim.kube_client().unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "workloads");
    let list = pods.list(&ListParams::default()).await.unwrap();
    let name = list.items[0].metadata.name.clone().unwrap();
    // Freeze the kubelet by using a long grace period on a second simulator is not needed: check
    // the object returned by the DELETE, which is the graceful state.
    let r = pods
        .delete(
            &name,
            &DeleteParams {
                grace_period_seconds: Some(60),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let p = r.left().expect("pod returned");
    assert!(p.metadata.deletion_timestamp.is_some());
    assert_eq!(p.metadata.deletion_grace_period_seconds, Some(60));
    // The kubelet (instant clock) removes it.
    nmo_envtest::testing::eventually(
        "the kubelet to remove the pod",
        std::time::Duration::from_secs(5),
        async || sim.get_json("", "pods", "workloads", &name).is_none(),
    )
    .await;
    // An unscheduled pod goes at once.
    let bare: Pod = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"},
        "spec": {"schedulerName": "none", "containers": [{"name": "c", "image": "busybox:1"}]}}),
    )
    .unwrap();
    let defaults: Api<Pod> = Api::namespaced(client.clone(), "default");
    let created = defaults
        .create(&PostParams::default(), &bare)
        .await
        .unwrap();
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));
    assert_eq!(
        created.spec.unwrap().termination_grace_period_seconds,
        Some(30)
    );
    let r = defaults
        .delete("bare", &DeleteParams::default())
        .await
        .unwrap();
    assert!(r.is_left());
    assert!(defaults.get_opt("bare").await.unwrap().is_none());
    // Nodes answer a DELETE with a Status.
    let nodes: Api<Node> = Api::all(client);
    let r = nodes
        .delete("node-0", &DeleteParams::default())
        .await
        .unwrap();
    assert!(r.is_right());
    sim.shutdown().await;
}

#[tokio::test]
async fn selectors_and_pagination() {
    let sim = start(Some(nmo_sim::Scenario::new(4, 8)), 0.0).await;
    let client = sim.kube_client().unwrap();
    let pods: Api<Pod> = Api::all(client.clone());
    let on = |n: &str| ListParams::default().fields(&format!("spec.nodeName={n}"));
    let l = pods.list(&on("node-2")).await.unwrap();
    assert_eq!(l.items.len(), 8);
    assert!(
        l.items
            .iter()
            .all(|p| p.spec.as_ref().unwrap().node_name.as_deref() == Some("node-2"))
    );
    let count = |params: ListParams| {
        let pods = pods.clone();
        async move { pods.list(&params).await.unwrap().items.len() }
    };
    let fields = |selector: &str| ListParams::default().fields(selector);
    let on_2_not_done = fields("spec.nodeName=node-2,status.phase!=Succeeded");
    assert_eq!(count(on_2_not_done).await, 7);
    assert_eq!(count(fields("status.phase==Succeeded")).await, 4);
    assert_eq!(count(fields("metadata.namespace=kube-system")).await, 8);
    assert_eq!(count(fields("metadata.name=standalone-node-1")).await, 1);
    let st = refused(pods.list(&ListParams::default().fields("spec.bogus=1"))).await;
    assert_eq!(
        (st.code, st.reason.as_str(), st.message.as_str()),
        (400, "BadRequest", "field label not supported: spec.bogus")
    );
    // Label selectors.
    let labelled = |s: &str| count(ListParams::default().labels(s));
    assert_eq!(labelled("app=standalone").await, 4);
    assert_eq!(labelled("app==batch").await, 4);
    assert_eq!(labelled("app in (batch,standalone)").await, 8);
    assert_eq!(labelled("app notin (batch,standalone),app").await, 20);
    assert_eq!(labelled("pod-template-hash").await, 16);
    assert_eq!(labelled("!pod-template-hash").await, 16);
    assert_eq!(labelled("app!=batch").await, 28);
    // limit/continue.
    let mut seen = Vec::new();
    let mut lp = ListParams::default().limit(5);
    loop {
        let page = pods.list(&lp).await.unwrap();
        assert!(page.items.len() <= 5);
        seen.extend(page.items.iter().map(|p| p.metadata.name.clone().unwrap()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(seen.len(), 32);
    let mut dedup = seen.clone();
    dedup.sort();
    dedup.dedup();
    assert_eq!(dedup.len(), 32);
    let st = refused(pods.list(&ListParams::default().continue_token("zz"))).await;
    assert_eq!(st.code, 400);
    // Namespaces exist and are Active.
    let nss: Api<Namespace> = Api::all(client);
    let ns = nss.get("workloads").await.unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Active"));
    let _ = nm_crd();
    sim.shutdown().await;
}

#[tokio::test]
async fn list_resource_version_semantics() {
    let sim = start(Some(nmo_sim::Scenario::plain(2, 3)), 0.0).await;
    let client = sim.kube_client().unwrap();
    let pods: Api<Pod> = Api::all(client.clone());
    let first = pods.list(&ListParams::default().limit(2)).await.unwrap();
    let rv = first.metadata.resource_version.clone().unwrap();
    // A write between pages: later pages still report the first page's version.
    let nodes: Api<Node> = Api::all(client.clone());
    relabelled(&nodes, "node-0", json!({"x": "1"})).await;
    let second = pods
        .list(
            &ListParams::default()
                .limit(2)
                .continue_token(first.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(
        second.metadata.resource_version.as_deref(),
        Some(rv.as_str())
    );
    // A version from the future: 504 like a server that waited for it in vain.
    let (code, body) = raw_get(&client, "/api/v1/pods?resourceVersion=99999999").await;
    assert_eq!((code, body["reason"].as_str()), (504, Some("Timeout")));
    // An exact read of a past version is not kept: 410.
    let (code, body) = raw_get(
        &client,
        &format!("/api/v1/pods?resourceVersion={rv}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!((code, body["reason"].as_str()), (410, Some("Expired")));
    // NotOlderThan an old version: the current state.
    let (code, body) = raw_get(
        &client,
        &format!("/api/v1/pods?resourceVersion={rv}&resourceVersionMatch=NotOlderThan"),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(body["items"].as_array().unwrap().len(), 6);
    sim.shutdown().await;
}

#[tokio::test]
async fn custom_resources_need_a_resource_version_to_be_replaced() {
    let sim = start(None, 0.0).await;
    let client = sim.kube_client().unwrap();
    let nm = json!({"apiVersion": "nodemaintenance.medik8s.io/v1beta1", "kind": "NodeMaintenance",
                    "metadata": {"name": "nm1"}, "spec": {"nodeName": "n1"}});
    let base = "/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances";
    assert_eq!(
        raw(
            &client,
            "POST",
            base,
            Some("application/json"),
            Some(nm.clone())
        )
        .await
        .0,
        201
    );
    let (code, body) = raw(
        &client,
        "PUT",
        &format!("{base}/nm1"),
        Some("application/json"),
        Some(nm),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "NodeMaintenance.nodemaintenance.medik8s.io \"nm1\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
    );
    // Server-side apply needs a field manager.
    let (code, body) = raw(
        &client,
        "PATCH",
        &format!("{base}/nm1"),
        Some("application/apply-patch+yaml"),
        Some(json!({})),
    )
    .await;
    assert_eq!((code, body["reason"].as_str()), (422, Some("Invalid")));
    sim.shutdown().await;
}
