//! The simulator's HTTP server: HTTP/1.1, and HTTP/2 without TLS (h2c, prior knowledge) on the
//! same port, as hyper tells them apart by the connection's first bytes. Each connection gets
//! an id that its requests carry, so the accounting can say how many connections a client used
//! (a client that multiplexes its watches uses a few; one that does not, one per watch). Every
//! open connection can be dropped at once ([`Connections::drop_all`]), as a killed API server's
//! are.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower::ServiceExt;

/// The connection a request came on (an extension of every request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnectionId(pub u64);

/// The server's open connections.
#[derive(Debug, Default)]
pub struct Connections {
    open: Mutex<HashMap<u64, tokio::task::AbortHandle>>,
}

impl Connections {
    /// Closes every open connection at once, mid-request and mid-watch (what a killed API
    /// server's clients see: their connections end without a goodbye); returns how many.
    pub fn drop_all(&self) -> usize {
        let open = std::mem::take(&mut *self.lock());
        for connection in open.values() {
            connection.abort();
        }
        open.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, tokio::task::AbortHandle>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Serves `router` on `listener` until `stop` says so, then lets open connections finish (the
/// watches end by themselves on the same signal). Open connections are kept in `connections`.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    mut stop: tokio::sync::watch::Receiver<bool>,
    connections: Arc<Connections>,
) {
    let next_id = Arc::new(AtomicU64::new(0));
    let graceful = GracefulShutdown::new();
    let builder = auto::Builder::new(TokioExecutor::new());
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.changed() => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of file descriptors, say: wait a little rather than spin.
                tracing::warn!(%error, "cannot accept a connection");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        // As Go's server does: small writes (HTTP/2 frames) go out at once.
        let _ = stream.set_nodelay(true);
        let id = ConnectionId(next_id.fetch_add(1, Ordering::Relaxed));
        let service =
            router
                .clone()
                .map_request(move |mut request: http::Request<hyper::body::Incoming>| {
                    request.extensions_mut().insert(id);
                    request
                });
        let connection = builder.serve_connection_with_upgrades(
            TokioIo::new(stream),
            TowerToHyperService::new(service),
        );
        let connection = graceful.watch(connection.into_owned());
        let open = connections.clone();
        // Registered before the task can end (and deregister itself).
        let mut registry = connections.lock();
        let task = tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "connection ended with an error");
            }
            open.lock().remove(&id.0);
        });
        registry.insert(id.0, task.abort_handle());
        drop(registry);
    }
    graceful.shutdown().await;
}
