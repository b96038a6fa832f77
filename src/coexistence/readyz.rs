//! The `/readyz` detail: while another operator runs, the probe's body says so under its own
//! verdict (which it leaves alone: a paused leader still serves the webhook, and is ready).

use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;

/// How big a `/readyz` body may be to have the detail added (it is a line or two).
const BODY_LIMIT: usize = 64 * 1024;

/// What `/readyz` adds to its body, if anything. Clones share it.
#[derive(Debug, Clone, Default)]
pub struct CoexistenceStatus(Arc<Mutex<Option<String>>>);

impl CoexistenceStatus {
    /// `/readyz` says `detail` from now on.
    pub fn set(&self, detail: String) {
        *self.lock() = Some(detail);
    }

    /// `/readyz` says nothing more.
    pub fn clear(&self) {
        *self.lock() = None;
    }

    /// What `/readyz` adds now.
    pub fn detail(&self) -> Option<String> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `router` with the detail of `status` added, on a line of its own, to `/readyz`'s body.
pub fn annotate_readyz(router: Router, status: CoexistenceStatus) -> Router {
    router.layer(middleware::from_fn_with_state(status, append_detail))
}

async fn append_detail(
    State(status): State<CoexistenceStatus>,
    request: Request,
    next: Next,
) -> Response {
    let readyz = request.uri().path() == "/readyz";
    let response = next.run(request).await;
    let Some(detail) = status.detail().filter(|_| readyz) else {
        return response;
    };
    let (parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => String::new(),
    };
    let body = format!("{}\n{detail}\n", text.trim_end());
    let mut response = Response::from_parts(parts, Body::from(body));
    response
        .headers_mut()
        .remove(axum::http::header::CONTENT_LENGTH);
    response
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    async fn get_body(router: Router, path: &str) -> (StatusCode, String) {
        let response = router
            .oneshot(Request::get(path).body(Body::empty()).expect("a request"))
            .await
            .expect("an answer");
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), BODY_LIMIT)
            .await
            .expect("a body");
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    #[tokio::test]
    async fn readyz_says_the_detail_under_its_own_verdict_and_nothing_else_changes() {
        let status = CoexistenceStatus::default();
        let router = || {
            annotate_readyz(
                Router::new()
                    .route("/readyz", get(|| async { "ok" }))
                    .route("/healthz", get(|| async { "ok" })),
                status.clone(),
            )
        };
        assert_eq!(
            get_body(router(), "/readyz").await,
            (StatusCode::OK, "ok".into())
        );
        status.set("paused: the Go Node Maintenance Operator runs".into());
        assert_eq!(
            get_body(router(), "/readyz").await,
            (
                StatusCode::OK,
                "ok\npaused: the Go Node Maintenance Operator runs\n".into()
            )
        );
        assert_eq!(get_body(router(), "/healthz").await.1, "ok");
        status.clear();
        assert_eq!(get_body(router(), "/readyz").await.1, "ok");
    }
}
