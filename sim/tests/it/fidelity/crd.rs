//! NodeMaintenance validation against its schema (deploy/base/crd.yaml).

use serde_json::json;

use super::fixtures::{NODEMAINTENANCES, maintenance};
use super::harness::{MERGE_PATCH, Pair, Req, compare};

#[tokio::test]
async fn a_maintenance_without_a_node_name_is_a_422() {
    let pair = Pair::start().await;
    let name = pair.unique("nm");
    let mut object = maintenance(&name, "node-x");
    object["spec"] = json!({"reason": "no node"});
    let (sim, real) = pair.both(Req::post(NODEMAINTENANCES, object)).await;
    compare("POST a NodeMaintenance without nodeName", &sim, &real).same();
}

#[tokio::test]
async fn a_node_name_of_the_wrong_type_is_a_422() {
    let pair = Pair::start().await;
    let name = pair.unique("nm");
    let mut object = maintenance(&name, "node-x");
    object["spec"]["nodeName"] = json!(42);
    let (sim, real) = pair.both(Req::post(NODEMAINTENANCES, object)).await;
    compare(
        "POST a NodeMaintenance with a numeric nodeName",
        &sim,
        &real,
    )
    .same();
}

#[tokio::test]
async fn unknown_fields_are_pruned() {
    let pair = Pair::start().await;
    let name = pair.unique("nm");
    let mut object = maintenance(&name, "node-x");
    object["spec"]["surprise"] = json!("dropped");
    object["extra"] = json!({"a": 1});
    let (sim, real) = pair.both(Req::post(NODEMAINTENANCES, object)).await;
    compare("POST a NodeMaintenance with unknown fields", &sim, &real).same();
}

#[tokio::test]
async fn a_phase_outside_its_enum_is_a_422() {
    let pair = Pair::start().await;
    let name = pair.unique("nm");
    pair.seed(Req::post(NODEMAINTENANCES, maintenance(&name, "node-x")))
        .await;
    let (sim, real) = pair
        .both(Req::patch(
            format!("{NODEMAINTENANCES}/{name}/status"),
            MERGE_PATCH,
            json!({"status": {"phase": "Paused", "drainProgress": "half"}}),
        ))
        .await;
    compare("a status with an unknown phase", &sim, &real)
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
    let (sim, real) = pair
        .both(Req::get(
            "/apis/nodemaintenance.medik8s.io/v1beta1/namespaces/{ns}/nodemaintenances",
        ))
        .await;
    compare("LIST NodeMaintenances in a namespace", &sim, &real)
        .known(
            "",
            "the real server answers a path no route serves with a plain-text `404 page not \
             found`, the simulator with a 404 Status; clients see a 404 either way",
        )
        .same();
}
