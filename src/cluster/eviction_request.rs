//! The `policy/v1` Eviction request, built here rather than with kube's `Api::evict`: kube 5.0
//! writes the eviction's delete options under `delete_options`, a key the API server ignores,
//! so neither the pod's uid precondition nor a grace period would reach it.

use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::core::Status;
use serde_json::{Value, json};

/// The body of an eviction of `namespace/name` that only applies to the pod with `uid`, with
/// `grace_period_seconds` when given (else the pod's own).
pub(super) fn body(
    namespace: &str,
    name: &str,
    uid: &str,
    grace_period_seconds: Option<i64>,
) -> Value {
    let mut delete_options = json!({"preconditions": {"uid": uid}});
    if let Some(seconds) = grace_period_seconds {
        delete_options["gracePeriodSeconds"] = json!(seconds);
    }
    json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": delete_options,
    })
}

/// Sends the eviction of `namespace/name` (the pod with `uid`).
pub(super) async fn send(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    uid: &str,
    grace_period_seconds: Option<i64>,
) -> Result<Status, kube::Error> {
    let path = format!("{}/{name}/eviction", Pod::url_path(&(), Some(namespace)));
    let bytes = serde_json::to_vec(&body(namespace, name, uid, grace_period_seconds))
        .map_err(kube::Error::SerdeError)?;
    let request = http::Request::post(path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(bytes)
        .map_err(kube::Error::HttpError)?;
    client.request::<Status>(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_names_the_uid_and_the_grace_period_where_the_api_reads_them() {
        let body = body("web", "web-0", "u-1", Some(5));
        assert_eq!(body["deleteOptions"]["preconditions"]["uid"], "u-1");
        assert_eq!(body["deleteOptions"]["gracePeriodSeconds"], 5);
        assert_eq!(body["metadata"]["name"], "web-0");
        assert!(body.get("delete_options").is_none());
        let own = super::body("web", "web-0", "u-1", None);
        assert!(own["deleteOptions"].get("gracePeriodSeconds").is_none());
    }
}
