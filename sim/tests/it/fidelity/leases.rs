//! Leases updated with resourceVersion preconditions (the node lease nmo shares with the
//! other medik8s operators, and its leader election).

use serde_json::{Value, json};

use super::fixtures::{fresh, lease, updated};
use super::harness::{Compare, MERGE_PATCH, Pair, Req};

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases";

/// The lease renewed by another holder, from what a server answered.
fn renew(body: &mut Value) {
    body["spec"]["renewTime"] = json!("2026-01-01T00:10:00.000000Z");
    body["spec"]["holderIdentity"] = json!("node-maintenance");
    body["spec"]["leaseTransitions"] = json!(1);
}

/// Creates the lease node-x on both, lets `meanwhile` change it, then PUTs on each the lease
/// that server created, renewed (and `without_version`, without its resourceVersion);
/// compares the answers to the PUT.
async fn renewed(what: &str, meanwhile: Option<Req>, without_version: bool) -> Compare {
    let pair = Pair::start().await;
    let created = pair
        .seed(Req::post(LEASES, lease("node-x", "node-healthcheck")))
        .await;
    if let Some(change) = meanwhile {
        pair.seed(change).await;
    }
    let edit = |body: &mut Value| {
        renew(body);
        if without_version {
            let metadata = body["metadata"].as_object_mut().expect("metadata");
            metadata.remove("resourceVersion");
        }
    };
    pair.compare_each(what, updated(&created, &format!("{LEASES}/node-x"), edit))
        .await
}

#[tokio::test]
async fn a_lease_is_created_as_given() {
    let req = Req::post(LEASES, lease("node-x", "node-healthcheck"));
    fresh("POST a lease", req).await.same();
}

#[tokio::test]
async fn an_update_at_the_current_resource_version_takes_the_lease() {
    renewed("PUT a lease at its resourceVersion", None, false)
        .await
        .same();
}

#[tokio::test]
async fn an_update_at_a_stale_resource_version_is_a_409() {
    // Someone renews it first.
    let first = json!({"spec": {"renewTime": "2026-01-01T00:05:00.000000Z"}});
    let meanwhile = Req::patch(format!("{LEASES}/node-x"), MERGE_PATCH, first);
    renewed(
        "PUT a lease at a stale resourceVersion",
        Some(meanwhile),
        false,
    )
    .await
    .same();
}

#[tokio::test]
async fn an_update_without_a_resource_version_is_unconditional() {
    renewed("PUT a lease without a resourceVersion", None, true)
        .await
        .same();
}

#[tokio::test]
async fn a_lease_with_an_invalid_duration_is_a_422() {
    let mut invalid = lease("node-x", "node-healthcheck");
    invalid["spec"]["leaseDurationSeconds"] = json!(0);
    fresh("POST a lease of 0 seconds", Req::post(LEASES, invalid))
        .await
        .same();
}
