//! Get, create, update and delete, and the errors they answer with.

use serde_json::{Value, json};

use super::fixtures::pod;
use super::harness::{MERGE_PATCH, Pair, Req, compare};

const PODS: &str = "/api/v1/namespaces/{ns}/pods";

#[tokio::test]
async fn a_created_pod_is_defaulted_alike() {
    let pair = Pair::start().await;
    let (sim, real) = pair
        .both(Req::post(PODS, pod("web-0", "node-x", "web")))
        .await;
    compare("POST pods", &sim, &real)
        .known(
            "/spec/serviceAccountName",
            "the simulator sets `default` as the ServiceAccount admission plugin does (without \
             the token volume it adds); the real server here runs without that plugin",
        )
        .same();
}

#[tokio::test]
async fn get_of_a_missing_pod_is_a_404_status() {
    let pair = Pair::start().await;
    let (sim, real) = pair.both(Req::get(format!("{PODS}/missing"))).await;
    compare("GET a missing pod", &sim, &real).same();
}

#[tokio::test]
async fn get_of_an_unknown_resource_is_a_404() {
    let pair = Pair::start().await;
    let (sim, real) = pair
        .both(Req::get("/api/v1/namespaces/{ns}/no-such-things"))
        .await;
    compare("GET an unknown resource", &sim, &real).same();
}

#[tokio::test]
async fn creating_a_pod_twice_is_a_409_already_exists() {
    let pair = Pair::start().await;
    pair.seed(Req::post(PODS, pod("web-0", "node-x", "web")))
        .await;
    let (sim, real) = pair
        .both(Req::post(PODS, pod("web-0", "node-x", "web")))
        .await;
    compare("POST an existing pod", &sim, &real).same();
}

#[tokio::test]
async fn a_pod_without_containers_is_a_422_with_its_cause() {
    let pair = Pair::start().await;
    let mut invalid = pod("web-0", "node-x", "web");
    invalid["spec"]["containers"] = json!([]);
    let (sim, real) = pair.both(Req::post(PODS, invalid)).await;
    compare("POST a pod without containers", &sim, &real).same();
}

#[tokio::test]
async fn an_object_without_a_name_is_a_422() {
    let pair = Pair::start().await;
    let mut nameless = pod("", "node-x", "web");
    nameless["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("name");
    let (sim, real) = pair.both(Req::post(PODS, nameless)).await;
    compare("POST a pod without a name", &sim, &real).same();
}

#[tokio::test]
async fn a_kind_that_does_not_match_the_path_is_a_400() {
    let pair = Pair::start().await;
    let mut wrong = pod("web-0", "node-x", "web");
    wrong["kind"] = json!("Node");
    let (sim, real) = pair.both(Req::post(PODS, wrong)).await;
    compare("POST a Node to pods", &sim, &real)
        .known(
            "/message",
            "the real server words it as a failed conversion between its internal types",
        )
        .same();
}

#[tokio::test]
async fn creating_in_a_missing_namespace_is_a_404() {
    let pair = Pair::start().await;
    let (sim, real) = pair
        .both(Req::post(
            "/api/v1/namespaces/no-such-namespace/pods",
            pod("web-0", "node-x", "web"),
        ))
        .await;
    compare("POST a pod into a missing namespace", &sim, &real).same();
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
    let (sim, real) = pair
        .both(Req::post(PODS, pod("web-1", "node-x", "web")))
        .await;
    compare("POST a pod into a terminating namespace", &sim, &real).same();
}

#[tokio::test]
async fn an_update_with_a_stale_resource_version_is_a_409_conflict() {
    let pair = Pair::start().await;
    let (sim_created, real_created) = pair
        .seed(Req::post(PODS, pod("web-0", "node-x", "web")))
        .await;
    pair.seed(Req::patch(
        format!("{PODS}/web-0"),
        MERGE_PATCH,
        json!({"metadata": {"labels": {"changed": "yes"}}}),
    ))
    .await;
    let update = |created: &Value| {
        let mut body = created.clone();
        body["metadata"]["labels"]["updated"] = json!("yes");
        Req::put(format!("{PODS}/web-0"), body)
    };
    let sim = pair.sim_only(update(&sim_created.body)).await;
    let real = pair.real_only(update(&real_created.body)).await;
    compare("PUT with a stale resourceVersion", &sim, &real).same();
}

#[tokio::test]
async fn an_update_with_the_current_resource_version_is_applied() {
    let pair = Pair::start().await;
    let (sim_created, real_created) = pair
        .seed(Req::post(PODS, pod("web-0", "node-x", "web")))
        .await;
    let update = |created: &Value| {
        let mut body = created.clone();
        body["metadata"]["labels"]["updated"] = json!("yes");
        body["metadata"]["annotations"] = json!({"note": "x"});
        Req::put(format!("{PODS}/web-0"), body)
    };
    let sim = pair.sim_only(update(&sim_created.body)).await;
    let real = pair.real_only(update(&real_created.body)).await;
    compare("PUT with the current resourceVersion", &sim, &real)
        .known(
            "/spec/serviceAccountName",
            "see a_created_pod_is_defaulted_alike",
        )
        .same();
}

#[tokio::test]
async fn a_forbidden_pod_update_is_a_422() {
    let pair = Pair::start().await;
    let (sim_created, real_created) = pair
        .seed(Req::post(PODS, pod("web-0", "node-x", "web")))
        .await;
    let update = |created: &Value| {
        let mut body = created.clone();
        body["spec"]["nodeName"] = json!("node-y");
        Req::put(format!("{PODS}/web-0"), body)
    };
    let sim = pair.sim_only(update(&sim_created.body)).await;
    let real = pair.real_only(update(&real_created.body)).await;
    compare("PUT a pod moved to another node", &sim, &real)
        .known(
            "/details/causes/0/message",
            "the real message ends with a diff of the two specs, which the simulator leaves out",
        )
        .known("/message", "idem")
        .same();
}
