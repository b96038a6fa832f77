//! Counts every request nmo makes to the Kubernetes API (watches, leader election and events
//! included), by verb, resource and HTTP status: the API server is the scarce resource of a
//! large cluster, so what nmo costs it should be visible.

use http::{Method, Request, Uri};
use kube::Client;
use kube::client::Body;

use crate::api_client::ConnectionCount;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// Labels of `nmo_kube_api_requests_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: &'static str,
    resource: String,
    code: String,
}

/// The request counter; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct ApiRequests {
    requests: Family<RequestLabels, Counter>,
}

impl ApiRequests {
    /// Registers the counter in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "nmo_kube_api_requests",
            "Requests to the Kubernetes API, by verb, resource and HTTP status code (`error`: no response)",
            self.requests.clone(),
        );
    }

    fn count(&self, verb: &'static str, resource: String, code: String) {
        self.requests
            .get_or_create(&RequestLabels {
                verb,
                resource,
                code,
            })
            .inc();
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

/// A client that sends through `client` and counts each request in `requests`.
pub fn count_requests(client: Client, requests: ApiRequests) -> Client {
    let namespace = client.default_namespace().to_string();
    let service = tower::service_fn(move |request: Request<Body>| {
        let client = client.clone();
        let requests = requests.clone();
        async move {
            let (verb, resource) = classify(request.method(), request.uri());
            let response = client.send(request).await;
            let code = match &response {
                Ok(response) => response.status().as_str().to_string(),
                Err(_) => "error".to_string(),
            };
            requests.count(verb, resource, code);
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
