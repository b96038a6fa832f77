//! How nmo's servers (metrics, health probes, the admission webhook) take connections, so that
//! no client in the cluster can wedge them: a cap on connections where a new one replaces the
//! oldest idle one ([`connections`]), a deadline for the TLS handshake and for each request's
//! headers, and an idle timeout that closes a connection with no request in progress. HTTP/2
//! only when asked for (its stream handling has had denial-of-service flaws, rapid reset), and
//! then with few streams per connection.

pub mod connections;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;
use tracing::{debug, warn};

use connections::{Admission, ConnectionTable, Requests, Ticket};

/// After a failed accept (typically out of file descriptors), how long to wait before the
/// next: a tight loop would burn a core and flood the log while nothing can succeed.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// How long requests in flight may finish once the server is told to stop.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// What one server allows a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once; at the cap a new one replaces the oldest idle one.
    pub max_connections: usize,
    /// A connection with no request in progress for this long is closed: one that sends
    /// nothing, trickles its request headers, or stays open between requests.
    pub idle_timeout: Duration,
    /// How long a request's headers may take to arrive (HTTP/1.1).
    pub header_read_timeout: Duration,
    /// How long a TLS handshake may take.
    pub handshake_timeout: Duration,
    /// Offer HTTP/2 (`--enable-http2`).
    pub enable_http2: bool,
    /// Streams one HTTP/2 connection may have open at once.
    pub max_http2_streams: u32,
}

impl Limits {
    /// For `/healthz` and `/readyz`: the kubelet opens a connection per probe and sends its
    /// request at once, so a few connections and short timeouts are plenty.
    pub fn probes(enable_http2: bool) -> Self {
        Limits {
            max_connections: 16,
            idle_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(5),
            enable_http2,
            max_http2_streams: 4,
        }
    }

    /// For `/metrics`: Prometheus keeps a connection open between scrapes (30 s or 60 s
    /// apart), so the idle timeout is longer than a scrape interval.
    pub fn metrics(enable_http2: bool) -> Self {
        Limits {
            max_connections: 16,
            idle_timeout: Duration::from_secs(90),
            header_read_timeout: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(5),
            enable_http2,
            max_http2_streams: 4,
        }
    }
}

/// Serves `router` on `listener` until `shutdown` completes, over TLS when `tls` is given;
/// then lets requests in flight finish for a few seconds.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) {
    let builder = Arc::new(builder(&limits));
    let table = ConnectionTable::new(limits.max_connections);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                warn!(%error, "accepting a connection failed");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let ticket = match table.admit() {
            Admission::Admitted(ticket) => ticket,
            Admission::Full => {
                debug!(%peer, "every connection is busy: refused one");
                continue;
            }
        };
        let connection = Connection {
            peer,
            ticket,
            tls: tls.clone(),
            router: router.clone(),
            builder: Arc::clone(&builder),
            watcher: graceful.watcher(),
            limits: limits.clone(),
        };
        tokio::spawn(connection.serve(tcp));
    }
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        debug!("connections still open after the drain timeout; closing them");
    }
}

/// hyper's connection builder for `limits`.
fn builder(limits: &Limits) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_http2_streams);
    if !limits.enable_http2 {
        builder = builder.http1_only();
    }
    builder
}

/// One accepted connection and what serving it needs.
struct Connection {
    peer: SocketAddr,
    ticket: Ticket,
    tls: Option<TlsAcceptor>,
    router: Router,
    builder: Arc<auto::Builder<TokioExecutor>>,
    watcher: Watcher,
    limits: Limits,
}

impl Connection {
    /// Serves the connection until it ends, is closed for idling, or makes room for another.
    async fn serve(self, tcp: TcpStream) {
        let Connection {
            peer,
            ticket,
            tls,
            router,
            builder,
            watcher,
            limits,
        } = self;
        let requests = ticket.requests();
        let serving = async {
            match tls {
                None => serve_io(TokioIo::new(tcp), requests, router, &builder, watcher).await,
                Some(acceptor) => {
                    let handshake =
                        tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await;
                    match handshake {
                        Ok(Ok(stream)) => {
                            serve_io(TokioIo::new(stream), requests, router, &builder, watcher)
                                .await;
                        }
                        Ok(Err(error)) => debug!(%peer, %error, "TLS handshake failed"),
                        Err(_) => debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
        };
        tokio::select! {
            () = serving => {}
            () = ticket.closed(limits.idle_timeout) => debug!(%peer, "closed an idle connection"),
        }
    }
}

/// Serves HTTP on `io`, each request marking the connection busy while it is handled.
async fn serve_io<I>(
    io: I,
    requests: Requests,
    router: Router,
    builder: &auto::Builder<TokioExecutor>,
    watcher: Watcher,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let busy = requests.busy();
        let router = router.clone();
        async move {
            let response = router.oneshot(request).await;
            drop(busy);
            response
        }
    });
    let connection = builder.serve_connection(io, service).into_owned();
    if let Err(error) = watcher.watch(connection).await {
        debug!(%error, "connection ended with an error");
    }
}

#[cfg(test)]
mod tests;
