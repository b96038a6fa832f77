//! The status subresource: status written through the resource is ignored, and the rest
//! written through `/status` is too.

use serde_json::json;

use super::fixtures::{
    NODEMAINTENANCES, fresh, maintenance_at, pod_at, post_maintenance, running_status,
    with_maintenance, with_pod,
};
use super::harness::{MERGE_PATCH, Req};

#[tokio::test]
async fn a_status_on_create_is_dropped_for_a_custom_resource() {
    post_maintenance("POST a NodeMaintenance with a status", |object| {
        object["status"] = json!({"phase": "Succeeded"});
    })
    .await
    .same();
}

#[tokio::test]
async fn a_status_written_through_the_resource_is_ignored() {
    let (pair, name) = with_maintenance().await;
    let patch = json!({"spec": {"reason": "changed"}, "status": {"phase": "Running"}});
    let req = Req::patch(maintenance_at(&name), MERGE_PATCH, patch);
    pair.compare("a status merge-patched through the resource", req)
        .await
        .same();
}

#[tokio::test]
async fn a_spec_written_through_status_is_ignored() {
    let (pair, name) = with_maintenance().await;
    let patch = json!({"spec": {"reason": "changed"},
                       "status": {"phase": "Running", "drainProgress": 40, "totalpods": 5,
                                  "pendingPods": ["a"], "lastError": ""}});
    let status_at = format!("{}/status", maintenance_at(&name));
    let req = Req::patch(status_at, MERGE_PATCH, patch);
    pair.compare("nmo's status write", req).await.same();
}

#[tokio::test]
async fn a_pod_status_is_written_through_its_subresource_only() {
    let pair = with_pod().await;
    for (what, path) in [
        ("a pod status patched through the pod", pod_at("web-0")),
        (
            "a pod status patched through /status",
            format!("{}/status", pod_at("web-0")),
        ),
    ] {
        pair.compare(what, Req::patch(path, MERGE_PATCH, running_status()))
            .await
            .defaulted_service_account("")
            .same();
    }
}

#[tokio::test]
async fn a_status_of_a_missing_object_is_a_404() {
    let req = Req::get(format!("{NODEMAINTENANCES}/missing/status"));
    fresh("GET the status of a missing NodeMaintenance", req)
        .await
        .same();
}
