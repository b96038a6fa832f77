//! The metrics endpoint (Prometheus text format) and the health probes.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

use super::health::{Liveness, Readiness, Verdict};

/// `/metrics` for `registry`.
pub fn metrics_router(registry: Arc<Registry>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(registry)
}

/// `/healthz` (see [`Liveness`]) and `/readyz` (see [`Readiness`]): 200 or 503, with a body
/// saying why.
pub fn probes_router(readiness: Readiness, liveness: Liveness) -> Router {
    let healthz = move || std::future::ready(answer(liveness.check()));
    let readyz = move || std::future::ready(answer(readiness.check()));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

fn answer(verdict: Verdict) -> (StatusCode, String) {
    let status = if verdict.ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, verdict.why)
}

async fn metrics(State(registry): State<Arc<Registry>>) -> impl IntoResponse {
    let mut body = String::new();
    match encode(&mut body, &registry) {
        Ok(()) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        ),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("cannot encode metrics: {error}"),
        ),
    }
}
