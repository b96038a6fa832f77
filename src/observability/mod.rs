//! What nmo shows of itself: logs and traces (`telemetry`), Prometheus metrics of the
//! maintenances (`operator_metrics`, `drain_metrics`), of every Kubernetes API request
//! (`api_metrics`) and of the process (`process_metrics`), all registered by `registry`, the
//! health probes' verdicts (`health`), and the plain-HTTP endpoints that serve the metrics and
//! the probes (`endpoints`, served by `http`).

pub mod api_metrics;
pub mod controller_metrics;
pub mod drain_metrics;
pub mod endpoints;
pub mod health;
pub mod http;
pub mod metrics_auth;
pub mod metrics_tls;
pub mod operator_metrics;
pub mod otlp_http;
pub mod process_metrics;
pub mod registry;
pub mod telemetry;
pub mod zap_json;
