//! DELETE: graceful deletion of pods, grace period 0, preconditions, finalizers.

use serde_json::{Value, json};

use super::fixtures::{
    NODEMAINTENANCES, PODS, fresh, maintenance, maintenance_at, pod, pod_at, with_maintenance,
    with_pod,
};
use super::harness::{Compare, MERGE_PATCH, Pair, Req};

/// DeleteOptions with `options` (e.g. `{"gracePeriodSeconds": 0}`).
fn delete_options(options: Value) -> Option<Value> {
    let mut body = json!({"kind": "DeleteOptions", "apiVersion": "v1"});
    if let (Some(fields), Value::Object(options)) = (body.as_object_mut(), options) {
        fields.extend(options);
    }
    Some(body)
}

/// DELETEs web-0 of `pair` with `options` on both; compares the answers.
async fn delete_web_0(pair: &Pair, what: &str, options: Option<Value>) -> Compare {
    pair.compare(what, Req::delete(pod_at("web-0"), options))
        .await
}

/// Compares what both then answer for web-0.
async fn get_web_0(pair: &Pair, what: &str) -> Compare {
    pair.compare(what, Req::get(pod_at("web-0"))).await
}

/// DELETEs web-0 with `options` and compares the answers (the pod as it was), then what both
/// answer for the pod (gone).
async fn deleted_at_once(pair: &Pair, what: &str, options: Option<Value>) {
    delete_web_0(pair, what, options)
        .await
        .defaulted_service_account("")
        .same();
    get_web_0(pair, "the deleted pod").await.same();
}

#[tokio::test]
async fn a_bound_pod_is_deleted_gracefully() {
    let pair = with_pod().await;
    delete_web_0(&pair, "DELETE a bound pod", None)
        .await
        .defaulted_service_account("")
        .same();
    get_web_0(&pair, "the terminating pod")
        .await
        .defaulted_service_account("")
        .same();
}

#[tokio::test]
async fn an_unbound_pod_is_deleted_at_once() {
    let pair = Pair::start().await;
    pair.seed(Req::post(PODS, pod("web-0", "", "web"))).await;
    deleted_at_once(&pair, "DELETE an unbound pod", None).await;
}

#[tokio::test]
async fn a_grace_period_of_0_deletes_at_once() {
    let pair = with_pod().await;
    let at_once = delete_options(json!({"gracePeriodSeconds": 0}));
    deleted_at_once(&pair, "DELETE with grace period 0", at_once).await;
}

#[tokio::test]
async fn a_second_delete_shortens_the_grace_period() {
    let pair = with_pod().await;
    pair.seed(Req::delete(pod_at("web-0"), None)).await;
    let shorter = delete_options(json!({"gracePeriodSeconds": 5}));
    delete_web_0(
        &pair,
        "a second DELETE with a shorter grace period",
        shorter,
    )
    .await
    .defaulted_service_account("")
    .same();
}

#[tokio::test]
async fn a_uid_precondition_that_fails_is_a_409() {
    let pair = with_pod().await;
    let uid = json!({"uid": "00000000-0000-0000-0000-000000000000"});
    let failing = delete_options(json!({"preconditions": uid}));
    delete_web_0(&pair, "DELETE with a uid precondition that fails", failing)
        .await
        .known(
            "/message",
            "names the object's uid, which each server generates itself",
        )
        .same();
}

#[tokio::test]
async fn a_delete_of_a_missing_object_is_a_404() {
    fresh("DELETE a missing pod", Req::delete(pod_at("missing"), None))
        .await
        .same();
}

#[tokio::test]
async fn a_finalizer_keeps_a_deleted_object_until_it_is_removed() {
    let pair = Pair::start().await;
    let name = pair.unique("nm");
    let mut object = maintenance(&name, "node-x");
    object["metadata"]["finalizers"] = json!(["foregroundDeleteNodeMaintenance"]);
    pair.seed(Req::post(NODEMAINTENANCES, object)).await;
    let at = maintenance_at(&name);
    let no_finalizers = json!({"metadata": {"finalizers": null}});
    for (what, req) in [
        ("DELETE an object with a finalizer", Req::delete(&at, None)),
        ("the object being deleted", Req::get(&at)),
        (
            "removing the last finalizer",
            Req::patch(&at, MERGE_PATCH, no_finalizers),
        ),
        ("the object once its finalizer is gone", Req::get(&at)),
    ] {
        pair.compare(what, req).await.same();
    }
}

#[tokio::test]
async fn a_delete_without_finalizers_answers_a_success_status_or_the_object() {
    let (pair, name) = with_maintenance().await;
    let req = Req::delete(maintenance_at(&name), None);
    pair.compare("DELETE a NodeMaintenance", req).await.same();
}

#[tokio::test]
async fn adding_a_finalizer_to_an_object_being_deleted_is_refused() {
    let pair = Pair::start().await;
    let name = pair.unique("nm");
    let mut object = maintenance(&name, "node-x");
    object["metadata"]["finalizers"] = json!(["a.example/one"]);
    pair.seed(Req::post(NODEMAINTENANCES, object)).await;
    pair.seed(Req::delete(maintenance_at(&name), None)).await;
    let more = json!({"metadata": {"finalizers": ["a.example/one", "b.example/two"]}});
    let req = Req::patch(maintenance_at(&name), MERGE_PATCH, more);
    pair.compare("adding a finalizer while deleting", req)
        .await
        .known(
            "/details/causes/1",
            "the real server reports this cause twice (its update validation runs the check \
             twice); the simulator once",
        )
        .known("/message", "idem")
        .same();
}
