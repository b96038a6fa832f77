//! Get, create, update and delete, and the errors they answer with.

use serde_json::{Value, json};

use super::fixtures::{PODS, fresh, pod, pod_at, post_pod, updated, with_pod};
use super::harness::{Compare, MERGE_PATCH, Pair, Req};

#[tokio::test]
async fn a_created_pod_is_defaulted_alike() {
    post_pod("POST pods", |_| {})
        .await
        .known(
            "/spec/serviceAccountName",
            "the simulator sets `default` as the ServiceAccount admission plugin does (without \
             the token volume it adds); the real server here runs without that plugin",
        )
        .same();
}

#[tokio::test]
async fn get_of_a_missing_pod_is_a_404_status() {
    fresh("GET a missing pod", Req::get(pod_at("missing")))
        .await
        .same();
}

#[tokio::test]
async fn get_of_an_unknown_resource_is_a_404() {
    let unknown = Req::get("/api/v1/namespaces/{ns}/no-such-things");
    fresh("GET an unknown resource", unknown).await.same();
}

#[tokio::test]
async fn creating_a_pod_twice_is_a_409_already_exists() {
    let pair = with_pod().await;
    let again = Req::post(PODS, pod("web-0", "node-x", "web"));
    pair.compare("POST an existing pod", again).await.same();
}

#[tokio::test]
async fn a_pod_without_containers_is_a_422_with_its_cause() {
    post_pod("POST a pod without containers", |invalid| {
        invalid["spec"]["containers"] = json!([]);
    })
    .await
    .same();
}

#[tokio::test]
async fn an_object_without_a_name_is_a_422() {
    post_pod("POST a pod without a name", |nameless| {
        let metadata = nameless["metadata"].as_object_mut().expect("metadata");
        metadata.remove("name");
    })
    .await
    .same();
}

#[tokio::test]
async fn a_kind_that_does_not_match_the_path_is_a_400() {
    post_pod("POST a Node to pods", |wrong| wrong["kind"] = json!("Node"))
        .await
        .known(
            "/message",
            "the real server words it as a failed conversion between its internal types",
        )
        .same();
}

#[tokio::test]
async fn creating_in_a_missing_namespace_is_a_404() {
    let elsewhere = "/api/v1/namespaces/no-such-namespace/pods";
    let req = Req::post(elsewhere, pod("web-0", "node-x", "web"));
    fresh("POST a pod into a missing namespace", req)
        .await
        .same();
}

#[tokio::test]
async fn creating_in_a_terminating_namespace_is_a_403() {
    let pair = Pair::start().await;
    // The namespace controller finishes a deletion only once the namespace is empty: a pod on
    // a node with no kubelet keeps it terminating.
    pair.seed(Req::post(PODS, pod("stays", "node-x", "web")))
        .await;
    pair.seed(Req::delete("/api/v1/namespaces/{ns}", None))
        .await;
    let req = Req::post(PODS, pod("web-1", "node-x", "web"));
    pair.compare("POST a pod into a terminating namespace", req)
        .await
        .same();
}

/// Creates web-0 on both, then (if `stale`) changes it, then PUTs on each what that server
/// created, changed by `edit`; compares the answers to the PUT.
async fn put_created(what: &str, stale: bool, edit: impl Fn(&mut Value)) -> Compare {
    let pair = Pair::start().await;
    let created = pair
        .seed(Req::post(PODS, pod("web-0", "node-x", "web")))
        .await;
    if stale {
        let change = json!({"metadata": {"labels": {"changed": "yes"}}});
        pair.seed(Req::patch(pod_at("web-0"), MERGE_PATCH, change))
            .await;
    }
    pair.compare_each(what, updated(&created, &pod_at("web-0"), edit))
        .await
}

#[tokio::test]
async fn an_update_with_a_stale_resource_version_is_a_409_conflict() {
    put_created("PUT with a stale resourceVersion", true, |body| {
        body["metadata"]["labels"]["updated"] = json!("yes");
    })
    .await
    .same();
}

#[tokio::test]
async fn an_update_with_the_current_resource_version_is_applied() {
    put_created("PUT with the current resourceVersion", false, |body| {
        body["metadata"]["labels"]["updated"] = json!("yes");
        body["metadata"]["annotations"] = json!({"note": "x"});
    })
    .await
    .defaulted_service_account("")
    .same();
}

#[tokio::test]
async fn a_forbidden_pod_update_is_a_422() {
    put_created("PUT a pod moved to another node", false, |body| {
        body["spec"]["nodeName"] = json!("node-y");
    })
    .await
    .known(
        "/details/causes/0/message",
        "the real message ends with a diff of the two specs, which the simulator leaves out",
    )
    .known("/message", "idem")
    .same();
}
