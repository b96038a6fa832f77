//! The webhook's request metrics: how many AdmissionReviews were answered, with which HTTP
//! status and verdict, and how long each took (the API server waits for every one of them, so
//! a slow webhook slows every `kubectl create nm`).

use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::time::Instant;

/// Labels of `nmo_webhook_requests_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    /// The HTTP status answered.
    code: String,
    /// `true` or `false` for an answered review, empty when none was (busy, malformed, ...).
    allowed: &'static str,
}

/// The verdict of a review, left on its response for the metrics.
#[derive(Debug, Clone, Copy)]
pub struct Verdict {
    /// Whether the review allowed the request.
    pub allowed: bool,
}

/// The webhook's metrics; cheap to clone.
#[derive(Debug, Clone)]
pub struct WebhookMetrics {
    requests: Family<RequestLabels, Counter>,
    duration: Histogram,
}

impl Default for WebhookMetrics {
    fn default() -> Self {
        let metrics = WebhookMetrics {
            requests: Family::default(),
            // 1 ms .. about 4 s: a review is a lookup or two; the API server gives up at 10 s.
            duration: Histogram::new(exponential_buckets(0.001, 2.0, 13)),
        };
        // The answered reviews' series exist from the start, at zero.
        for allowed in ["true", "false"] {
            drop(metrics.requests.get_or_create(&RequestLabels {
                code: "200".to_string(),
                allowed,
            }));
        }
        metrics
    }
}

impl WebhookMetrics {
    /// Registers both metrics in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "nmo_webhook_requests",
            "Requests to the validating webhook, by HTTP status and verdict (allowed is empty when no review was answered)",
            self.requests.clone(),
        );
        registry.register(
            "nmo_webhook_request_duration_seconds",
            "Time the validating webhook took to answer a request",
            self.duration.clone(),
        );
    }

    fn observe(&self, code: u16, verdict: Option<Verdict>, took: Duration) {
        let allowed = match verdict {
            Some(Verdict { allowed: true }) => "true",
            Some(Verdict { allowed: false }) => "false",
            None => "",
        };
        self.requests
            .get_or_create(&RequestLabels {
                code: code.to_string(),
                allowed,
            })
            .inc();
        self.duration.observe(took.as_secs_f64());
    }
}

/// Middleware: counts and times every request the webhook's router answers.
pub async fn track(
    State(metrics): State<WebhookMetrics>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let response = next.run(request).await;
    let verdict = response.extensions().get::<Verdict>().copied();
    metrics.observe(response.status().as_u16(), verdict, started.elapsed());
    response
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    #[test]
    fn requests_are_counted_by_status_and_verdict_and_timed() {
        let metrics = WebhookMetrics::default();
        metrics.observe(
            200,
            Some(Verdict { allowed: true }),
            Duration::from_millis(3),
        );
        metrics.observe(
            200,
            Some(Verdict { allowed: false }),
            Duration::from_millis(3),
        );
        metrics.observe(
            200,
            Some(Verdict { allowed: false }),
            Duration::from_millis(3),
        );
        metrics.observe(503, None, Duration::from_secs(5));
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for line in [
            "nmo_webhook_requests_total{code=\"200\",allowed=\"true\"} 1",
            "nmo_webhook_requests_total{code=\"200\",allowed=\"false\"} 2",
            "nmo_webhook_requests_total{code=\"503\",allowed=\"\"} 1",
            "nmo_webhook_request_duration_seconds_count 4",
            "nmo_webhook_request_duration_seconds_bucket{le=\"0.004\"} 3",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
    }
}
