//! Leases updated with resourceVersion preconditions (the node lease nmo shares with the
//! other medik8s operators, and its leader election).

use serde_json::{Value, json};

use super::fixtures::lease;
use super::harness::{Pair, Reply, Req, compare};

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases";

fn renewed(created: &Reply, rv: Option<&Value>) -> Req {
    let mut body = created.body.clone();
    body["spec"]["renewTime"] = json!("2026-01-01T00:10:00.000000Z");
    body["spec"]["holderIdentity"] = json!("node-maintenance");
    body["spec"]["leaseTransitions"] = json!(1);
    match rv {
        Some(rv) => body["metadata"]["resourceVersion"] = rv.clone(),
        None => {
            body["metadata"]
                .as_object_mut()
                .expect("metadata")
                .remove("resourceVersion");
        }
    }
    Req::put(format!("{LEASES}/node-x"), body)
}

#[tokio::test]
async fn a_lease_is_created_as_given() {
    let pair = Pair::start().await;
    let (sim, real) = pair
        .both(Req::post(LEASES, lease("node-x", "node-healthcheck")))
        .await;
    compare("POST a lease", &sim, &real).same();
}

#[tokio::test]
async fn an_update_at_the_current_resource_version_takes_the_lease() {
    let pair = Pair::start().await;
    let (sim_created, real_created) = pair
        .seed(Req::post(LEASES, lease("node-x", "node-healthcheck")))
        .await;
    let sim = pair
        .sim_only(renewed(
            &sim_created,
            Some(&sim_created.body["metadata"]["resourceVersion"]),
        ))
        .await;
    let real = pair
        .real_only(renewed(
            &real_created,
            Some(&real_created.body["metadata"]["resourceVersion"]),
        ))
        .await;
    compare("PUT a lease at its resourceVersion", &sim, &real).same();
}

#[tokio::test]
async fn an_update_at_a_stale_resource_version_is_a_409() {
    let pair = Pair::start().await;
    let (sim_created, real_created) = pair
        .seed(Req::post(LEASES, lease("node-x", "node-healthcheck")))
        .await;
    // Someone renews it first.
    pair.seed(Req::patch(
        format!("{LEASES}/node-x"),
        super::harness::MERGE_PATCH,
        json!({"spec": {"renewTime": "2026-01-01T00:05:00.000000Z"}}),
    ))
    .await;
    let sim = pair
        .sim_only(renewed(
            &sim_created,
            Some(&sim_created.body["metadata"]["resourceVersion"]),
        ))
        .await;
    let real = pair
        .real_only(renewed(
            &real_created,
            Some(&real_created.body["metadata"]["resourceVersion"]),
        ))
        .await;
    compare("PUT a lease at a stale resourceVersion", &sim, &real).same();
}

#[tokio::test]
async fn an_update_without_a_resource_version_is_unconditional() {
    let pair = Pair::start().await;
    let (sim_created, real_created) = pair
        .seed(Req::post(LEASES, lease("node-x", "node-healthcheck")))
        .await;
    let sim = pair.sim_only(renewed(&sim_created, None)).await;
    let real = pair.real_only(renewed(&real_created, None)).await;
    compare("PUT a lease without a resourceVersion", &sim, &real).same();
}

#[tokio::test]
async fn a_lease_with_an_invalid_duration_is_a_422() {
    let pair = Pair::start().await;
    let mut invalid = lease("node-x", "node-healthcheck");
    invalid["spec"]["leaseDurationSeconds"] = json!(0);
    let (sim, real) = pair.both(Req::post(LEASES, invalid)).await;
    compare("POST a lease of 0 seconds", &sim, &real).same();
}
