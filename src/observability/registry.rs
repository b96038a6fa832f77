//! Every metric `/metrics` serves, registered in one place: `nmo run` serves this registry, and
//! the documentation test (tests/it/docs) reads the metric names from it, so a metric added
//! here without its line in docs/observability.md fails that test. The servers get the finished
//! registry; the other steps of start-up get the handles they feed.

use std::sync::Arc;

use kube::Client;
use prometheus_client::registry::Registry;

use super::api_metrics::{self, ApiRequests};
use super::health::HealthMetrics;
use super::operator_metrics::OperatorMetrics;
use super::process_metrics::{Leadership, ProcessCollector, register_build_info};
use crate::api_client::{ConnectionCount, OperatorClient};
use crate::webhook::WebhookMetrics;

/// The registry and the handles the operator's parts record into.
#[derive(Debug)]
pub struct Metrics {
    /// What `/metrics` encodes.
    pub registry: Arc<Registry>,
    /// The maintenances' metrics, fed by the actors' observer.
    pub maintenances: OperatorMetrics,
    /// Every request to the API server.
    pub api_requests: ApiRequests,
    /// `nmo_leader`.
    pub leadership: Leadership,
    /// The admission webhook's metrics.
    pub webhook: WebhookMetrics,
    /// `nmo_ready` and `nmo_watches`.
    pub health: HealthMetrics,
}

impl Metrics {
    /// Registers every metric; the connection counts only when the client reports them (nmo's
    /// own HTTP/2 client does; a client built elsewhere, as in some tests, does not).
    pub fn new(connections: Option<ConnectionCount>) -> Metrics {
        let mut registry = Registry::default();
        let maintenances = OperatorMetrics::default();
        maintenances.register(&mut registry);
        let api_requests = ApiRequests::default();
        api_requests.register(&mut registry);
        if let Some(connections) = connections {
            api_metrics::register_connections(&mut registry, connections);
        }
        register_build_info(&mut registry);
        registry.register_collector(Box::new(ProcessCollector));
        let leadership = Leadership::default();
        leadership.register(&mut registry);
        let webhook = WebhookMetrics::default();
        webhook.register(&mut registry);
        let health = HealthMetrics::default();
        health.register(&mut registry);
        Metrics {
            registry: Arc::new(registry),
            maintenances,
            api_requests,
            leadership,
            webhook,
            health,
        }
    }

    /// The metrics of `client` (its connections reported when it counts them), and the client
    /// that counts each request it makes (watches, election and events included) in them.
    pub fn for_client(client: OperatorClient) -> (Metrics, Client) {
        let metrics = Metrics::new(client.connections);
        let client =
            api_metrics::count_requests(client.client, metrics.api_requests.clone(), client.host);
        (metrics, client)
    }
}
