//! The kube client nmo runs with counts every request by verb, resource and status code.

use axum::Router;
use axum::http::StatusCode;
use axum::routing::{get, post};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::EvictParams;
use kube::{Api, Client};
use nmo::observability::api_metrics::{ApiRequests, count_requests};
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use serde_json::json;
use tokio::net::TcpListener;

fn status(code: u16, reason: &str) -> String {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": reason, "reason": reason, "code": code
    })
    .to_string()
}

/// Just enough of an API server: one node, no other, and evictions refused.
fn api() -> Router {
    Router::new()
        .route(
            "/api/v1/nodes/{name}",
            get(
                |axum::extract::Path(name): axum::extract::Path<String>| async move {
                    if name == "n1" {
                        let node =
                            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}});
                        (StatusCode::OK, node.to_string())
                    } else {
                        (StatusCode::NOT_FOUND, status(404, "NotFound"))
                    }
                },
            ),
        )
        .route(
            "/api/v1/namespaces/{ns}/pods/{name}/eviction",
            post(|| async {
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    status(429, "TooManyRequests"),
                )
            }),
        )
}

#[tokio::test]
async fn api_requests_are_counted_by_verb_resource_and_code() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, api()).await.unwrap() });
    let mut config = kube::Config::new(format!("http://{address}").parse().unwrap());
    // kube retries 429s itself (up to 15 times, minutes of backoff): count what nmo sees.
    config.default_retry = false;
    let requests = ApiRequests::default();
    let client = count_requests(
        Client::try_from(config).unwrap(),
        requests.clone(),
        address.to_string(),
    );

    let nodes: Api<Node> = Api::all(client.clone());
    assert!(nodes.get("n1").await.is_ok());
    assert!(nodes.get_opt("n2").await.unwrap().is_none());
    assert!(nodes.get_opt("n3").await.unwrap().is_none());
    let pods: Api<Pod> = Api::namespaced(client, "app");
    assert!(pods.evict("web-0", &EvictParams::default()).await.is_err());

    let mut registry = Registry::default();
    requests.register(&mut registry);
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    for expected in [
        "nmo_kube_api_requests_total{verb=\"get\",resource=\"nodes\",code=\"200\"} 1\n",
        "nmo_kube_api_requests_total{verb=\"get\",resource=\"nodes\",code=\"404\"} 2\n",
        "nmo_kube_api_requests_total{verb=\"create\",resource=\"pods/eviction\",code=\"429\"} 1\n",
        // client-go's families, as controller-runtime's dashboards read them.
        &format!(
            "rest_client_requests_total{{code=\"404\",method=\"GET\",host=\"{address}\"}} 2\n"
        ),
        &format!(
            "rest_client_requests_total{{code=\"429\",method=\"POST\",host=\"{address}\"}} 1\n"
        ),
        &format!(
            "rest_client_request_duration_seconds_count{{verb=\"GET\",host=\"{address}\"}} 3\n"
        ),
    ] {
        assert!(text.contains(expected), "no {expected} in:\n{text}");
    }
    server.abort();
}
