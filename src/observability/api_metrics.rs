//! Counts every request nmo makes to the Kubernetes API (watches, leader election and events
//! included), by verb, resource and HTTP status: the API server is the scarce resource of a
//! large cluster, so what nmo costs it should be visible.

use std::time::Duration;

use http::{Method, Request, StatusCode, Uri};
use kube::Client;
use kube::client::Body;
use tokio::time::Instant;

use crate::api_client::ConnectionCount;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Labels of `nmo_kube_api_requests_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: &'static str,
    resource: String,
    code: String,
}

/// Labels of client-go's `rest_client_requests_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RestClientLabels {
    code: String,
    method: String,
    host: String,
}

/// Labels of client-go's `rest_client_request_duration_seconds`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RestLatencyLabels {
    verb: String,
    host: String,
}

/// client-go's request latency buckets (seconds).
const LATENCY_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

/// The request counters; cheap to clone.
#[derive(Debug, Clone)]
pub struct ApiRequests {
    requests: Family<RequestLabels, Counter>,
    rest_requests: Family<RestClientLabels, Counter>,
    rest_latency: Family<RestLatencyLabels, Histogram>,
}

impl Default for ApiRequests {
    fn default() -> Self {
        ApiRequests {
            requests: Family::default(),
            rest_requests: Family::default(),
            rest_latency: Family::new_with_constructor(|| Histogram::new(LATENCY_BUCKETS)),
        }
    }
}

impl ApiRequests {
    /// Registers the counter in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "nmo_kube_api_requests",
            "Requests to the Kubernetes API, by verb, resource and HTTP status code (`error`: no response)",
            self.requests.clone(),
        );
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host (client-go's)",
            self.rest_requests.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds, until the response headers, by verb (HTTP method) and host (client-go's)",
            self.rest_latency.clone(),
        );
    }

    fn count(
        &self,
        request: &Request<Body>,
        host: &str,
        answered: Option<StatusCode>,
        took: Duration,
    ) {
        let (verb, resource) = classify(request.method(), request.uri());
        let code = answered.map_or_else(|| "error".to_string(), |code| code.as_str().to_string());
        self.requests
            .get_or_create(&RequestLabels {
                verb,
                resource,
                code,
            })
            .inc();
        let method = request.method().as_str().to_string();
        self.rest_requests
            .get_or_create(&RestClientLabels {
                // client-go's label for a request that got no response.
                code: answered
                    .map_or_else(|| "<error>".to_string(), |code| code.as_str().to_string()),
                method: method.clone(),
                host: host.to_string(),
            })
            .inc();
        self.rest_latency
            .get_or_create(&RestLatencyLabels {
                verb: method,
                host: host.to_string(),
            })
            .observe(took.as_secs_f64());
    }
}

/// Registers `nmo_kube_api_connections_opened_total` and `nmo_kube_api_connections_open`: with
/// HTTP/2 a handful of connections carry every request and watch, so a count that grows with
/// the maintenances says the API server stopped offering HTTP/2 (or a stream budget is too low).
pub fn register_connections(registry: &mut Registry, connections: ConnectionCount) {
    registry.register_collector(Box::new(Connections(connections)));
}

/// Reads the connection counts at each scrape.
#[derive(Debug)]
struct Connections(ConnectionCount);

impl Collector for Connections {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let opened = ConstCounter::new(self.0.opened());
        opened.encode(encoder.encode_descriptor(
            "nmo_kube_api_connections_opened",
            "Connections opened to the Kubernetes API",
            None,
            opened.metric_type(),
        )?)?;
        let open = ConstGauge::new(self.0.open());
        open.encode(encoder.encode_descriptor(
            "nmo_kube_api_connections_open",
            "Connections to the Kubernetes API open now",
            None,
            open.metric_type(),
        )?)?;
        Ok(())
    }
}

/// A client that sends through `client` and counts each request in `requests`; `host` (the API
/// server's `host:port`) labels client-go's families.
pub fn count_requests(client: Client, requests: ApiRequests, host: String) -> Client {
    let namespace = client.default_namespace().to_string();
    let host: std::sync::Arc<str> = host.into();
    let service = tower::service_fn(move |request: Request<Body>| {
        let client = client.clone();
        let requests = requests.clone();
        let host = host.clone();
        async move {
            // Only the method and the path are kept: the request itself goes to `send`.
            let mut counted = Request::new(Body::empty());
            *counted.method_mut() = request.method().clone();
            *counted.uri_mut() = request.uri().clone();
            let started = Instant::now();
            let response = client.send(request).await;
            let answered = response.as_ref().ok().map(http::Response::status);
            requests.count(&counted, &host, answered, started.elapsed());
            response
        }
    });
    Client::new(service, namespace)
}

/// The Kubernetes verb and resource (`pods`, `pods/eviction`, `nodemaintenances`) of a request
/// path such as `/api/v1/namespaces/ns/pods/p/eviction` or
/// `/apis/coordination.k8s.io/v1/namespaces/ns/leases?watch=true`.
pub fn classify(method: &Method, uri: &Uri) -> (&'static str, String) {
    let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
    let rest: &[&str] = match segments.first() {
        Some(&"api") => segments.get(2..).unwrap_or_default(),
        Some(&"apis") => segments.get(3..).unwrap_or_default(),
        _ => &[],
    };
    // `namespaces/<ns>/<resource>...` is a namespaced resource; `namespaces[/<name>]` alone is
    // the Namespace resource itself.
    let rest = match rest {
        ["namespaces", _, resource, tail @ ..] => {
            let mut inner = vec![*resource];
            inner.extend_from_slice(tail);
            inner
        }
        other => other.to_vec(),
    };
    let resource = match rest.as_slice() {
        [] => "discovery".to_string(),
        [resource] | [resource, _] => (*resource).to_string(),
        [resource, _, sub, ..] => format!("{resource}/{sub}"),
    };
    let named = rest.len() >= 2;
    let watch = uri.query().is_some_and(|query| {
        query
            .split('&')
            .any(|pair| pair == "watch=true" || pair == "watch=1")
    });
    let verb = match *method {
        Method::GET if watch => "watch",
        Method::GET if named => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "other",
    };
    (verb, resource)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_reported_as_they_are_at_the_scrape() {
        let connections = ConnectionCount::default();
        let mut registry = Registry::default();
        register_connections(&mut registry, connections.clone());
        let scrape = |registry: &Registry| {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
            text
        };
        assert!(
            scrape(&registry).contains("nmo_kube_api_connections_opened_total 0\n"),
            "{}",
            scrape(&registry)
        );
        let _open = connections.count_opened_for_tests();
        let text = scrape(&registry);
        assert!(
            text.contains("nmo_kube_api_connections_opened_total 1\n"),
            "{text}"
        );
        assert!(text.contains("nmo_kube_api_connections_open 1\n"), "{text}");
    }

    fn of(method: Method, uri: &str) -> (&'static str, String) {
        classify(&method, &uri.parse::<Uri>().unwrap())
    }

    #[test]
    fn verbs_and_resources_of_what_nmo_requests() {
        assert_eq!(
            of(Method::POST, "/api/v1/namespaces/app/pods/web-1/eviction"),
            ("create", "pods/eviction".to_string())
        );
        assert_eq!(
            of(Method::GET, "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1"),
            ("list", "pods".to_string())
        );
        assert_eq!(
            of(
                Method::GET,
                "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&watch=true&resourceVersion=5"
            ),
            ("watch", "pods".to_string())
        );
        assert_eq!(
            of(Method::GET, "/api/v1/nodes/n1"),
            ("get", "nodes".to_string())
        );
        assert_eq!(
            of(Method::PATCH, "/api/v1/nodes/n1"),
            ("patch", "nodes".to_string())
        );
        assert_eq!(
            of(
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/medik8s-leases/leases/node-n1"
            ),
            ("update", "leases".to_string())
        );
        assert_eq!(
            of(
                Method::PATCH,
                "/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances/nm/status"
            ),
            ("patch", "nodemaintenances/status".to_string())
        );
        assert_eq!(
            of(Method::GET, "/api/v1/namespaces/medik8s-leases"),
            ("get", "namespaces".to_string())
        );
        assert_eq!(
            of(Method::POST, "/api/v1/namespaces"),
            ("create", "namespaces".to_string())
        );
        assert_eq!(
            of(Method::DELETE, "/api/v1/namespaces/app/pods/p"),
            ("delete", "pods".to_string())
        );
        assert_eq!(
            of(Method::GET, "/version"),
            ("list", "discovery".to_string())
        );
    }
}
