//! NodeMaintenance validation against its schema (deploy/base/crd.yaml).

use serde_json::json;

use super::fixtures::{maintenance_at, post_maintenance, with_maintenance};
use super::harness::{MERGE_PATCH, Pair, Req};

#[tokio::test]
async fn a_maintenance_without_a_node_name_is_a_422() {
    post_maintenance("POST a NodeMaintenance without nodeName", |object| {
        object["spec"] = json!({"reason": "no node"});
    })
    .await
    .same();
}

#[tokio::test]
async fn a_node_name_of_the_wrong_type_is_a_422() {
    post_maintenance("POST a NodeMaintenance with a numeric nodeName", |object| {
        object["spec"]["nodeName"] = json!(42);
    })
    .await
    .same();
}

#[tokio::test]
async fn unknown_fields_are_pruned() {
    post_maintenance("POST a NodeMaintenance with unknown fields", |object| {
        object["spec"]["surprise"] = json!("dropped");
        object["extra"] = json!({"a": 1});
    })
    .await
    .same();
}

#[tokio::test]
async fn a_phase_outside_its_enum_is_a_422() {
    let (pair, name) = with_maintenance().await;
    let status = json!({"status": {"phase": "Paused", "drainProgress": "half"}});
    let status_at = format!("{}/status", maintenance_at(&name));
    pair.compare(
        "a status with an unknown phase",
        Req::patch(status_at, MERGE_PATCH, status),
    )
    .await
    // The real server validates properties in Go's (random) map order.
    .unordered("/details/causes")
    // Sorted, the causes are the rules' `<nil>` one (the CRD has rules, not checked after a
    // type error), then the type error, then the enum's.
    .known(
        "/details/causes/1/message",
        "on a status write the real server's type errors name the field from the status \
         (`drainProgress in body`), the simulator's from the object (`status.drainProgress`)",
    )
    .known("/message", "idem, and the order of the causes in it")
    .same();
}

#[tokio::test]
async fn a_namespaced_path_for_a_cluster_scoped_resource_is_a_404() {
    let pair = Pair::start().await;
    let path = "/apis/nodemaintenance.medik8s.io/v1beta1/namespaces/{ns}/nodemaintenances";
    pair.compare("LIST NodeMaintenances in a namespace", Req::get(path))
        .await
        .known(
            "",
            "the real server answers a path no route serves with a plain-text `404 page not \
             found`, the simulator with a 404 Status; clients see a 404 either way",
        )
        .same();
}
