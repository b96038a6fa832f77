//! The status subresource: status written through the resource is ignored, and the rest
//! written through `/status` is too.

use serde_json::json;

use super::fixtures::{NODEMAINTENANCES, maintenance, pod, running_status};
use super::harness::{MERGE_PATCH, Pair, Req, compare};

const PODS: &str = "/api/v1/namespaces/{ns}/pods";
const SA: &str = "see crud::a_created_pod_is_defaulted_alike";

#[tokio::test]
async fn a_status_on_create_is_dropped_for_a_custom_resource() {
    let pair = Pair::start().await;
    let name = pair.unique("nm");
    let mut object = maintenance(&name, "node-x");
    object["status"] = json!({"phase": "Succeeded"});
    let (sim, real) = pair.both(Req::post(NODEMAINTENANCES, object)).await;
    compare("POST a NodeMaintenance with a status", &sim, &real).same();
}

#[tokio::test]
async fn a_status_written_through_the_resource_is_ignored() {
    let pair = Pair::start().await;
    let name = pair.unique("nm");
    pair.seed(Req::post(NODEMAINTENANCES, maintenance(&name, "node-x")))
        .await;
    let (sim, real) = pair
        .both(Req::patch(
            format!("{NODEMAINTENANCES}/{name}"),
            MERGE_PATCH,
            json!({"spec": {"reason": "changed"}, "status": {"phase": "Running"}}),
        ))
        .await;
    compare("a status merge-patched through the resource", &sim, &real).same();
}

#[tokio::test]
async fn a_spec_written_through_status_is_ignored() {
    let pair = Pair::start().await;
    let name = pair.unique("nm");
    pair.seed(Req::post(NODEMAINTENANCES, maintenance(&name, "node-x")))
        .await;
    let (sim, real) = pair
        .both(Req::patch(
            format!("{NODEMAINTENANCES}/{name}/status"),
            MERGE_PATCH,
            json!({"spec": {"reason": "changed"},
                   "status": {"phase": "Running", "drainProgress": 40, "totalpods": 5,
                              "pendingPods": ["a"], "lastError": ""}}),
        ))
        .await;
    compare("nmo's status write", &sim, &real).same();
}

#[tokio::test]
async fn a_pod_status_is_written_through_its_subresource_only() {
    let pair = Pair::start().await;
    pair.seed(Req::post(PODS, pod("web-0", "node-x", "web")))
        .await;
    let (sim, real) = pair
        .both(Req::patch(
            format!("{PODS}/web-0"),
            MERGE_PATCH,
            running_status(),
        ))
        .await;
    compare("a pod status patched through the pod", &sim, &real)
        .known("/spec/serviceAccountName", SA)
        .same();
    let (sim, real) = pair
        .both(Req::patch(
            format!("{PODS}/web-0/status"),
            MERGE_PATCH,
            running_status(),
        ))
        .await;
    compare("a pod status patched through /status", &sim, &real)
        .known("/spec/serviceAccountName", SA)
        .same();
}

#[tokio::test]
async fn a_status_of_a_missing_object_is_a_404() {
    let pair = Pair::start().await;
    let (sim, real) = pair
        .both(Req::get(format!("{NODEMAINTENANCES}/missing/status")))
        .await;
    compare("GET the status of a missing NodeMaintenance", &sim, &real).same();
}
