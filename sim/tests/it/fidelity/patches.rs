//! PATCH: JSON patches with `test` ops (how nmo changes taints and finalizers safely), merge
//! patches (nmo's status writes), strategic merge patches (kubectl's default).

use serde_json::{Value, json};

use super::fixtures::{fresh, maintenance_at, node, pod_at, with_maintenance, with_pod};
use super::harness::{Compare, JSON_PATCH, MERGE_PATCH, Pair, Req, STRATEGIC_PATCH};

/// What a real Node has that the test's node does not: the zero values of the Go structs a
/// kubelet fills (serialized empty), and the TTL controller's annotation (controller manager).
fn node_fields(compare: Compare) -> Compare {
    compare
        .known(
            "/status/daemonEndpoints",
            "a Go struct the real server serializes even empty",
        )
        .known("/status/nodeInfo", "idem")
        .known(
            "/metadata/annotations",
            "the real controller manager's TTL controller annotates every node",
        )
}

/// Patches web-0 (on both) with `patch` of `content_type`; compares the answers.
async fn patch_web_0(what: &str, content_type: &'static str, patch: Value) -> Compare {
    let req = Req::patch(pod_at("web-0"), content_type, patch);
    with_pod().await.compare(what, req).await
}

/// Registers a node named after `prefix` on both, then patches it (`subresource`: "" or
/// "/status") with `patch` of `content_type`; compares the answers, modulo `node_fields`.
async fn patch_node(
    what: &str,
    prefix: &str,
    subresource: &str,
    content_type: &'static str,
    patch: Value,
) -> Compare {
    let pair = Pair::start().await;
    let name = pair.unique(prefix);
    node(&pair, &name).await;
    let path = format!("/api/v1/nodes/{name}{subresource}");
    node_fields(
        pair.compare(what, Req::patch(path, content_type, patch))
            .await,
    )
}

#[tokio::test]
async fn a_json_patch_whose_test_holds_is_applied() {
    let patch = json!([
        {"op": "test", "path": "/metadata/labels/app", "value": "web"},
        {"op": "add", "path": "/metadata/labels/patched", "value": "yes"},
        {"op": "remove", "path": "/metadata/labels/tier"}
    ]);
    patch_web_0("JSON patch with a passing test", JSON_PATCH, patch)
        .await
        .defaulted_service_account("")
        .same();
}

#[tokio::test]
async fn a_json_patch_whose_test_fails_is_refused() {
    let patch = json!([
        {"op": "test", "path": "/metadata/labels/app", "value": "db"},
        {"op": "add", "path": "/metadata/labels/patched", "value": "yes"}
    ]);
    patch_web_0("JSON patch with a failing test", JSON_PATCH, patch)
        .await
        .same();
}

#[tokio::test]
async fn a_json_patch_removing_a_missing_path_is_refused() {
    let patch = json!([{"op": "remove", "path": "/metadata/annotations/none"}]);
    patch_web_0("JSON patch removing a missing path", JSON_PATCH, patch)
        .await
        .same();
}

#[tokio::test]
async fn a_json_patch_testing_taints_then_replacing_them() {
    let taint = json!({"key": "medik8s.io/drain", "effect": "NoSchedule"});
    // nmo's taint write: the taints as last seen (none), then the new list.
    let patch = json!([
        {"op": "test", "path": "/spec/taints", "value": null},
        {"op": "add", "path": "/spec/taints", "value": [taint]},
        {"op": "add", "path": "/spec/unschedulable", "value": true}
    ]);
    let what = "JSON patch of a node's taints";
    patch_node(what, "patched-node", "", JSON_PATCH, patch)
        .await
        .same();
}

#[tokio::test]
async fn a_merge_patch_sets_and_removes_fields() {
    let patch = json!({"metadata": {"labels": {"tier": null, "added": "yes"},
                                    "annotations": {"note": "x"}}});
    patch_web_0("merge patch", MERGE_PATCH, patch)
        .await
        .defaulted_service_account("")
        .same();
}

#[tokio::test]
async fn a_strategic_merge_patch_merges_containers_by_name() {
    let patch = json!({"spec": {"containers": [{"name": "main", "image": "registry.invalid/app:2.0"}]},
                       "metadata": {"labels": {"tier": null}}});
    patch_web_0(
        "strategic merge patch of a container",
        STRATEGIC_PATCH,
        patch,
    )
    .await
    .defaulted_service_account("")
    .same();
}

#[tokio::test]
async fn a_strategic_merge_patch_cordons_a_node_like_kubectl() {
    let patch = json!({"spec": {"unschedulable": true}});
    patch_node(
        "kubectl cordon",
        "cordoned-node",
        "",
        STRATEGIC_PATCH,
        patch,
    )
    .await
    .same();
}

#[tokio::test]
async fn a_strategic_merge_patch_deletes_a_list_element_by_key() {
    let patch = json!({"status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}});
    let what = "strategic merge patch with $patch: delete";
    patch_node(what, "status-node", "/status", STRATEGIC_PATCH, patch)
        .await
        .known(
            "/status/conditions",
            "the real server omits a list left empty (Go's omitempty); the simulator keeps `[]`",
        )
        .same();
}

#[tokio::test]
async fn a_patch_of_a_missing_object_is_a_404() {
    let patch = json!({"metadata": {"labels": {"a": "b"}}});
    let req = Req::patch(pod_at("missing"), MERGE_PATCH, patch);
    fresh("merge patch of a missing pod", req).await.same();
}

#[tokio::test]
async fn a_patch_with_an_unsupported_content_type_is_a_415() {
    let patch = json!({"metadata": {"labels": {"a": "b"}}});
    let what = "PATCH with an unknown content type";
    patch_web_0(what, "application/x-unknown-patch", patch)
        .await
        .same();
}

#[tokio::test]
async fn a_strategic_merge_patch_of_a_custom_resource_is_a_415() {
    let (pair, name) = with_maintenance().await;
    let patch = json!({"spec": {"reason": "other"}});
    let req = Req::patch(maintenance_at(&name), STRATEGIC_PATCH, patch);
    pair.compare("strategic merge patch of a NodeMaintenance", req)
        .await
        .same();
}
