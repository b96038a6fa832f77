//! DELETE: graceful deletion of pods, grace period 0, preconditions, finalizers.

use serde_json::json;

use super::fixtures::{NODEMAINTENANCES, maintenance, pod};
use super::harness::{MERGE_PATCH, Pair, Req, compare};

const PODS: &str = "/api/v1/namespaces/{ns}/pods";
const SA: &str = "see crud::a_created_pod_is_defaulted_alike";

#[tokio::test]
async fn a_bound_pod_is_deleted_gracefully() {
    let pair = Pair::start().await;
    pair.seed(Req::post(PODS, pod("web-0", "node-x", "web")))
        .await;
    let (sim, real) = pair.both(Req::delete(format!("{PODS}/web-0"), None)).await;
    compare("DELETE a bound pod", &sim, &real)
        .known("/spec/serviceAccountName", SA)
        .same();
    let (sim, real) = pair.both(Req::get(format!("{PODS}/web-0"))).await;
    compare("the terminating pod", &sim, &real)
        .known("/spec/serviceAccountName", SA)
        .same();
}

#[tokio::test]
async fn an_unbound_pod_is_deleted_at_once() {
    let pair = Pair::start().await;
    pair.seed(Req::post(PODS, pod("web-0", "", "web"))).await;
    let (sim, real) = pair.both(Req::delete(format!("{PODS}/web-0"), None)).await;
    compare("DELETE an unbound pod", &sim, &real)
        .known("/spec/serviceAccountName", SA)
        .same();
    let (sim, real) = pair.both(Req::get(format!("{PODS}/web-0"))).await;
    compare("the deleted pod", &sim, &real).same();
}

#[tokio::test]
async fn a_grace_period_of_0_deletes_at_once() {
    let pair = Pair::start().await;
    pair.seed(Req::post(PODS, pod("web-0", "node-x", "web")))
        .await;
    let (sim, real) = pair
        .both(Req::delete(
            format!("{PODS}/web-0"),
            Some(json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})),
        ))
        .await;
    compare("DELETE with grace period 0", &sim, &real)
        .known("/spec/serviceAccountName", SA)
        .same();
    let (sim, real) = pair.both(Req::get(format!("{PODS}/web-0"))).await;
    compare("the deleted pod", &sim, &real).same();
}

#[tokio::test]
async fn a_second_delete_shortens_the_grace_period() {
    let pair = Pair::start().await;
    pair.seed(Req::post(PODS, pod("web-0", "node-x", "web")))
        .await;
    pair.seed(Req::delete(format!("{PODS}/web-0"), None)).await;
    let (sim, real) = pair
        .both(Req::delete(
            format!("{PODS}/web-0"),
            Some(json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 5})),
        ))
        .await;
    compare("a second DELETE with a shorter grace period", &sim, &real)
        .known("/spec/serviceAccountName", SA)
        .same();
}

#[tokio::test]
async fn a_uid_precondition_that_fails_is_a_409() {
    let pair = Pair::start().await;
    pair.seed(Req::post(PODS, pod("web-0", "node-x", "web")))
        .await;
    let (sim, real) = pair
        .both(Req::delete(
            format!("{PODS}/web-0"),
            Some(json!({"kind": "DeleteOptions", "apiVersion": "v1",
                        "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})),
        ))
        .await;
    compare("DELETE with a uid precondition that fails", &sim, &real)
        .known(
            "/message",
            "names the object's uid, which each server generates itself",
        )
        .same();
}

#[tokio::test]
async fn a_delete_of_a_missing_object_is_a_404() {
    let pair = Pair::start().await;
    let (sim, real) = pair
        .both(Req::delete(format!("{PODS}/missing"), None))
        .await;
    compare("DELETE a missing pod", &sim, &real).same();
}

#[tokio::test]
async fn a_finalizer_keeps_a_deleted_object_until_it_is_removed() {
    let pair = Pair::start().await;
    let name = pair.unique("nm");
    let mut object = maintenance(&name, "node-x");
    object["metadata"]["finalizers"] = json!(["foregroundDeleteNodeMaintenance"]);
    pair.seed(Req::post(NODEMAINTENANCES, object)).await;
    let (sim, real) = pair
        .both(Req::delete(format!("{NODEMAINTENANCES}/{name}"), None))
        .await;
    compare("DELETE an object with a finalizer", &sim, &real).same();
    let (sim, real) = pair
        .both(Req::get(format!("{NODEMAINTENANCES}/{name}")))
        .await;
    compare("the object being deleted", &sim, &real).same();
    let (sim, real) = pair
        .both(Req::patch(
            format!("{NODEMAINTENANCES}/{name}"),
            MERGE_PATCH,
            json!({"metadata": {"finalizers": null}}),
        ))
        .await;
    compare("removing the last finalizer", &sim, &real).same();
    let (sim, real) = pair
        .both(Req::get(format!("{NODEMAINTENANCES}/{name}")))
        .await;
    compare("the object once its finalizer is gone", &sim, &real).same();
}

#[tokio::test]
async fn a_delete_without_finalizers_answers_a_success_status_or_the_object() {
    let pair = Pair::start().await;
    let name = pair.unique("nm");
    pair.seed(Req::post(NODEMAINTENANCES, maintenance(&name, "node-x")))
        .await;
    let (sim, real) = pair
        .both(Req::delete(format!("{NODEMAINTENANCES}/{name}"), None))
        .await;
    compare("DELETE a NodeMaintenance", &sim, &real).same();
}

#[tokio::test]
async fn adding_a_finalizer_to_an_object_being_deleted_is_refused() {
    let pair = Pair::start().await;
    let name = pair.unique("nm");
    let mut object = maintenance(&name, "node-x");
    object["metadata"]["finalizers"] = json!(["a.example/one"]);
    pair.seed(Req::post(NODEMAINTENANCES, object)).await;
    pair.seed(Req::delete(format!("{NODEMAINTENANCES}/{name}"), None))
        .await;
    let (sim, real) = pair
        .both(Req::patch(
            format!("{NODEMAINTENANCES}/{name}"),
            MERGE_PATCH,
            json!({"metadata": {"finalizers": ["a.example/one", "b.example/two"]}}),
        ))
        .await;
    compare("adding a finalizer while deleting", &sim, &real)
        .known(
            "/details/causes/1",
            "the real server reports this cause twice (its update validation runs the check \
             twice); the simulator once",
        )
        .known("/message", "idem")
        .same();
}
