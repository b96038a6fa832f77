//! HTTPS serving: a TCP listener, a rustls handshake per connection, hyper serving the axum
//! router on it (HTTP/1.1 only unless HTTP/2 is enabled), and a graceful stop.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use http_body_util::LengthLimitError;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use kube::Client;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use super::metrics::{Verdict, WebhookMetrics, track};
use super::review;
use super::{VALIDATE_PATH, WebhookError};

/// A client that connects but never finishes its handshake or its request headers is cut off
/// after this long, so idle sockets cannot pile up.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long in-flight reviews may finish after shutdown was asked for.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The API server's own cap on a request body (3 MiB): no AdmissionReview it sends is larger.
pub const BODY_LIMIT: usize = 3 * 1024 * 1024;

/// How long a client may take to send a request body once its headers are in.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Reviews read and decided at once. Each holds at most [`BODY_LIMIT`] of body (the decoded
/// review is smaller), so this bounds the webhook's memory; the API server retries a webhook
/// call that gets 503.
pub const MAX_CONCURRENT_REVIEWS: usize = 8;

/// How long a review waits for its turn before it is answered 503.
pub const QUEUE_TIMEOUT: Duration = Duration::from_secs(5);

/// What every review handler shares.
#[derive(Clone)]
struct Reviewer {
    client: Client,
    turns: Arc<Semaphore>,
}

/// The webhook's routes: the validating path only (anything else is 404 / 405), every request
/// counted and timed in `metrics`.
pub fn router(client: Client, metrics: WebhookMetrics) -> Router {
    Router::new()
        .route(VALIDATE_PATH, post(validate))
        .with_state(Reviewer {
            client,
            turns: Arc::new(Semaphore::new(MAX_CONCURRENT_REVIEWS)),
        })
        .layer(axum::middleware::from_fn_with_state(metrics, track))
}

async fn validate(State(reviewer): State<Reviewer>, body: Body) -> Response {
    // The turn is taken before the body is read: bodies in memory never exceed the cap.
    let Ok(Ok(_turn)) = tokio::time::timeout(QUEUE_TIMEOUT, reviewer.turns.acquire()).await else {
        warn!("webhook busy: too many reviews at once");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "too many reviews at once, retry",
        )
            .into_response();
    };
    let body = match tokio::time::timeout(BODY_READ_TIMEOUT, to_bytes(body, BODY_LIMIT)).await {
        Ok(Ok(body)) => body,
        Ok(Err(error)) if too_large(&error) => {
            debug!("rejected an AdmissionReview over the body limit");
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body over {BODY_LIMIT} bytes"),
            )
                .into_response();
        }
        Ok(Err(error)) => {
            debug!(%error, "cannot read a webhook request body");
            return (StatusCode::BAD_REQUEST, error.to_string()).into_response();
        }
        Err(_) => {
            debug!("webhook request body not sent in time");
            return (
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "request body not sent within {} s",
                    BODY_READ_TIMEOUT.as_secs()
                ),
            )
                .into_response();
        }
    };
    match review::decode(&body) {
        Ok(request) => {
            let response = review::decide(&reviewer.client, &request).await;
            let verdict = Verdict {
                allowed: response.allowed,
            };
            let mut answer = axum::Json(review::encode(response)).into_response();
            answer.extensions_mut().insert(verdict);
            answer
        }
        Err(error) => {
            debug!(%error, "rejected a malformed AdmissionReview");
            (StatusCode::BAD_REQUEST, error.to_string()).into_response()
        }
    }
}

/// Whether reading a body failed because it was over the limit.
fn too_large(error: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if current.is::<LengthLimitError>() {
            return true;
        }
        source = current.source();
    }
    false
}

/// Accepts connections until `shutdown` completes, then lets in-flight reviews finish (for at
/// most [`DRAIN_TIMEOUT`]).
pub async fn run(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    router: Router,
    enable_http2: bool,
    shutdown: impl Future<Output = ()>,
) -> Result<(), WebhookError> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HANDSHAKE_TIMEOUT);
    if !enable_http2 {
        builder = builder.http1_only();
    }
    let builder = Arc::new(builder);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => {
                    let service = TowerToHyperService::new(router.clone());
                    let acceptor = acceptor.clone();
                    let builder = Arc::clone(&builder);
                    let watcher = graceful.watcher();
                    tokio::spawn(async move {
                        let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                            Ok(Ok(tls)) => tls,
                            Ok(Err(error)) => {
                                debug!(%peer, %error, "webhook TLS handshake failed");
                                return;
                            }
                            Err(_) => {
                                debug!(%peer, "webhook TLS handshake timed out");
                                return;
                            }
                        };
                        let connection = builder
                            .serve_connection(TokioIo::new(tls), service)
                            .into_owned();
                        if let Err(error) = watcher.watch(connection).await {
                            debug!(%peer, %error, "webhook connection ended with an error");
                        }
                    });
                }
                Err(error) => {
                    // Typically out of file descriptors: back off instead of spinning.
                    warn!(%error, "webhook cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            () = &mut shutdown => break,
        }
    }
    info!("webhook stopping");
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        warn!("webhook connections still open after the drain timeout; closing them");
    }
    Ok(())
}

/// Binds `address`, reporting which address failed.
pub async fn bind(address: SocketAddr) -> Result<TcpListener, WebhookError> {
    TcpListener::bind(address)
        .await
        .map_err(|source| WebhookError::Bind { address, source })
}

#[cfg(test)]
mod tests {
    use axum::http::Request;
    use futures::stream;
    use tower::ServiceExt as _;

    use super::*;

    /// A client that must not be called: the answers below come before any lookup.
    fn no_api() -> Client {
        let service = tower::service_fn(|_request: Request<kube::client::Body>| async {
            Err::<axum::http::Response<kube::client::Body>, _>(std::io::Error::other("no API"))
        });
        Client::new(service, "default")
    }

    fn post(body: Body) -> Request<Body> {
        Request::post(VALIDATE_PATH)
            .header("content-type", "application/json")
            .body(body)
            .expect("a request")
    }

    /// An UPDATE review (decided without lookups) padded with `padding` bytes of annotation.
    fn update_review(padding: usize) -> Vec<u8> {
        let object = serde_json::json!({
            "apiVersion": "nodemaintenance.medik8s.io/v1beta1", "kind": "NodeMaintenance",
            "metadata": {"name": "nm", "annotations": {"pad": "x".repeat(padding)}},
            "spec": {"nodeName": "n1"},
        });
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u1", "name": "nm", "operation": "UPDATE",
                        "object": object, "oldObject": object,
                        "options": {"junk": [[[[1, 2, 3]]]]}},
        }))
        .expect("json")
    }

    #[tokio::test]
    async fn a_body_over_the_api_servers_3_mib_cap_is_refused_unread() {
        let body = update_review(BODY_LIMIT);
        assert!(body.len() > BODY_LIMIT);
        let response = router(no_api(), WebhookMetrics::default())
            .oneshot(post(Body::from(body)))
            .await
            .expect("answers");
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[tokio::test]
    async fn a_review_just_under_the_cap_is_decided() {
        // Two copies of the object: each padded to a bit under half the cap.
        let body = update_review(BODY_LIMIT / 2 - 4096);
        assert!(body.len() < BODY_LIMIT && body.len() > BODY_LIMIT - 16 * 1024);
        let metrics = WebhookMetrics::default();
        let response = router(no_api(), metrics.clone())
            .oneshot(post(Body::from(body)))
            .await
            .expect("answers");
        assert_eq!(response.status(), StatusCode::OK);
        // Counted with its verdict and timed.
        let mut registry = prometheus_client::registry::Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        assert!(
            text.contains("nmo_webhook_requests_total{code=\"200\",allowed=\"true\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("nmo_webhook_request_duration_seconds_count 1"),
            "{text}"
        );
        let bytes = to_bytes(response.into_body(), BODY_LIMIT)
            .await
            .expect("a body");
        let review: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
        assert_eq!(review["response"]["uid"], "u1");
        assert_eq!(review["response"]["allowed"], true, "{review}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_never_finishes_is_cut_off() {
        let never = stream::pending::<Result<Vec<u8>, std::io::Error>>();
        let answer = tokio::time::timeout(
            BODY_READ_TIMEOUT + Duration::from_secs(1),
            router(no_api(), WebhookMetrics::default()).oneshot(post(Body::from_stream(never))),
        )
        .await
        .expect("answered by the read timeout")
        .expect("answers");
        assert_eq!(answer.status(), StatusCode::REQUEST_TIMEOUT);
    }

    #[tokio::test(start_paused = true)]
    async fn reviews_beyond_the_concurrency_cap_wait_then_get_503() {
        let router = router(no_api(), WebhookMetrics::default());
        // Slow clients take every turn.
        let mut slow = Vec::new();
        for _ in 0..MAX_CONCURRENT_REVIEWS {
            let never = stream::pending::<Result<Vec<u8>, std::io::Error>>();
            slow.push(tokio::spawn(
                router.clone().oneshot(post(Body::from_stream(never))),
            ));
        }
        tokio::task::yield_now().await;
        let started = tokio::time::Instant::now();
        let answer = router
            .clone()
            .oneshot(post(Body::from(update_review(0))))
            .await
            .expect("answers");
        assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(started.elapsed() >= QUEUE_TIMEOUT);
        // Once the slow ones are cut off, reviews are served again.
        for task in slow {
            let answer = task.await.expect("joined").expect("answers");
            assert_eq!(answer.status(), StatusCode::REQUEST_TIMEOUT);
        }
        let answer = router
            .oneshot(post(Body::from(update_review(0))))
            .await
            .expect("answers");
        assert_eq!(answer.status(), StatusCode::OK);
    }
}
