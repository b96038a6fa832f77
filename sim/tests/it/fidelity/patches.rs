//! PATCH: JSON patches with `test` ops (how nmo changes taints and finalizers safely), merge
//! patches (nmo's status writes), strategic merge patches (kubectl's default).

use serde_json::json;

use super::fixtures::{NODEMAINTENANCES, maintenance, node, pod};
use super::harness::{JSON_PATCH, MERGE_PATCH, Pair, Req, STRATEGIC_PATCH, compare};

const PODS: &str = "/api/v1/namespaces/{ns}/pods";
const SA: &str = "see crud::a_created_pod_is_defaulted_alike";

/// What a real Node has that the test's node does not: the zero values of the Go structs a
/// kubelet fills (serialized empty), and the TTL controller's annotation (controller manager).
fn node_fields(compare: super::harness::Compare<'_>) -> super::harness::Compare<'_> {
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

async fn with_pod() -> Pair {
    let pair = Pair::start().await;
    pair.seed(Req::post(PODS, pod("web-0", "node-x", "web")))
        .await;
    pair
}

#[tokio::test]
async fn a_json_patch_whose_test_holds_is_applied() {
    let pair = with_pod().await;
    let patch = json!([
        {"op": "test", "path": "/metadata/labels/app", "value": "web"},
        {"op": "add", "path": "/metadata/labels/patched", "value": "yes"},
        {"op": "remove", "path": "/metadata/labels/tier"}
    ]);
    let (sim, real) = pair
        .both(Req::patch(format!("{PODS}/web-0"), JSON_PATCH, patch))
        .await;
    compare("JSON patch with a passing test", &sim, &real)
        .known("/spec/serviceAccountName", SA)
        .same();
}

#[tokio::test]
async fn a_json_patch_whose_test_fails_is_refused() {
    let pair = with_pod().await;
    let patch = json!([
        {"op": "test", "path": "/metadata/labels/app", "value": "db"},
        {"op": "add", "path": "/metadata/labels/patched", "value": "yes"}
    ]);
    let (sim, real) = pair
        .both(Req::patch(format!("{PODS}/web-0"), JSON_PATCH, patch))
        .await;
    compare("JSON patch with a failing test", &sim, &real).same();
}

#[tokio::test]
async fn a_json_patch_removing_a_missing_path_is_refused() {
    let pair = with_pod().await;
    let patch = json!([{"op": "remove", "path": "/metadata/annotations/none"}]);
    let (sim, real) = pair
        .both(Req::patch(format!("{PODS}/web-0"), JSON_PATCH, patch))
        .await;
    compare("JSON patch removing a missing path", &sim, &real).same();
}

#[tokio::test]
async fn a_json_patch_testing_taints_then_replacing_them() {
    let pair = Pair::start().await;
    let name = pair.unique("patched-node");
    node(&pair, &name).await;
    let taint = json!({"key": "medik8s.io/drain", "effect": "NoSchedule"});
    // nmo's taint write: the taints as last seen (none), then the new list.
    let patch = json!([
        {"op": "test", "path": "/spec/taints", "value": null},
        {"op": "add", "path": "/spec/taints", "value": [taint]},
        {"op": "add", "path": "/spec/unschedulable", "value": true}
    ]);
    let (sim, real) = pair
        .both(Req::patch(
            format!("/api/v1/nodes/{name}"),
            JSON_PATCH,
            patch,
        ))
        .await;
    node_fields(compare("JSON patch of a node's taints", &sim, &real)).same();
}

#[tokio::test]
async fn a_merge_patch_sets_and_removes_fields() {
    let pair = with_pod().await;
    let patch = json!({"metadata": {"labels": {"tier": null, "added": "yes"},
                                    "annotations": {"note": "x"}}});
    let (sim, real) = pair
        .both(Req::patch(format!("{PODS}/web-0"), MERGE_PATCH, patch))
        .await;
    compare("merge patch", &sim, &real)
        .known("/spec/serviceAccountName", SA)
        .same();
}

#[tokio::test]
async fn a_strategic_merge_patch_merges_containers_by_name() {
    let pair = with_pod().await;
    let patch = json!({"spec": {"containers": [{"name": "main", "image": "registry.invalid/app:2.0"}]},
                       "metadata": {"labels": {"tier": null}}});
    let (sim, real) = pair
        .both(Req::patch(format!("{PODS}/web-0"), STRATEGIC_PATCH, patch))
        .await;
    compare("strategic merge patch of a container", &sim, &real)
        .known("/spec/serviceAccountName", SA)
        .same();
}

#[tokio::test]
async fn a_strategic_merge_patch_cordons_a_node_like_kubectl() {
    let pair = Pair::start().await;
    let name = pair.unique("cordoned-node");
    node(&pair, &name).await;
    let (sim, real) = pair
        .both(Req::patch(
            format!("/api/v1/nodes/{name}"),
            STRATEGIC_PATCH,
            json!({"spec": {"unschedulable": true}}),
        ))
        .await;
    node_fields(compare("kubectl cordon", &sim, &real)).same();
}

#[tokio::test]
async fn a_strategic_merge_patch_deletes_a_list_element_by_key() {
    let pair = Pair::start().await;
    let name = pair.unique("status-node");
    node(&pair, &name).await;
    let patch = json!({"status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}});
    let (sim, real) = pair
        .both(Req::patch(
            format!("/api/v1/nodes/{name}/status"),
            STRATEGIC_PATCH,
            patch,
        ))
        .await;
    node_fields(compare(
        "strategic merge patch with $patch: delete",
        &sim,
        &real,
    ))
    .known(
        "/status/conditions",
        "the real server omits a list left empty (Go's omitempty); the simulator keeps `[]`",
    )
    .same();
}

#[tokio::test]
async fn a_patch_of_a_missing_object_is_a_404() {
    let pair = Pair::start().await;
    let (sim, real) = pair
        .both(Req::patch(
            format!("{PODS}/missing"),
            MERGE_PATCH,
            json!({"metadata": {"labels": {"a": "b"}}}),
        ))
        .await;
    compare("merge patch of a missing pod", &sim, &real).same();
}

#[tokio::test]
async fn a_patch_with_an_unsupported_content_type_is_a_415() {
    let pair = with_pod().await;
    let (sim, real) = pair
        .both(Req::patch(
            format!("{PODS}/web-0"),
            "application/x-unknown-patch",
            json!({"metadata": {"labels": {"a": "b"}}}),
        ))
        .await;
    compare("PATCH with an unknown content type", &sim, &real).same();
}

#[tokio::test]
async fn a_strategic_merge_patch_of_a_custom_resource_is_a_415() {
    let pair = Pair::start().await;
    let name = pair.unique("nm");
    pair.seed(Req::post(NODEMAINTENANCES, maintenance(&name, "node-x")))
        .await;
    let (sim, real) = pair
        .both(Req::patch(
            format!("{NODEMAINTENANCES}/{name}"),
            STRATEGIC_PATCH,
            json!({"spec": {"reason": "other"}}),
        ))
        .await;
    compare("strategic merge patch of a NodeMaintenance", &sim, &real).same();
}
