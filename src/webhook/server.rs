//! HTTPS serving: a TCP listener, a rustls handshake per connection, hyper serving the axum
//! router on it (HTTP/1.1 only unless HTTP/2 is enabled), and a graceful stop.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use kube::Client;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use super::review;
use super::{VALIDATE_PATH, WebhookError};

/// A client that connects but never finishes its handshake or its request headers is cut off
/// after this long, so idle sockets cannot pile up.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long in-flight reviews may finish after shutdown was asked for.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// AdmissionReviews of an UPDATE carry the object twice; a NodeMaintenance with thousands of
/// pending pods in its status is well under this.
const BODY_LIMIT: usize = 16 * 1024 * 1024;

/// The webhook's routes: the validating path only (anything else is 404 / 405).
pub fn router(client: Client) -> Router {
    Router::new()
        .route(VALIDATE_PATH, post(validate))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(client)
}

async fn validate(State(client): State<Client>, body: Bytes) -> Response {
    match review::decode(&body) {
        Ok(request) => {
            let response = review::decide(&client, &request).await;
            axum::Json(review::encode(response)).into_response()
        }
        Err(error) => {
            debug!(%error, "rejected a malformed AdmissionReview");
            (StatusCode::BAD_REQUEST, error.to_string()).into_response()
        }
    }
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
