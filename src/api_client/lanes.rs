//! Spreads requests over as few connections as the server's stream limit allows.
//!
//! hyper's pool puts every request to a host on its one HTTP/2 connection, however many streams
//! are open. An HTTP/2 server caps the streams of a connection (SETTINGS_MAX_CONCURRENT_STREAMS;
//! kube-apiserver's `--http2-max-streams-per-connection`), and a request past the cap waits in
//! the client until a stream closes. Watches hold their stream for minutes, so with enough of
//! them every other request would wait behind them: an eviction or a status write stuck until a
//! watch happens to end. A lane is one hyper client (so one connection per host); a request goes
//! to the oldest lane with a stream to spare, and when every lane is at its budget a new lane
//! (a new connection) is opened. Keeping each lane below the server's cap means no request ever
//! queues behind a watch, whatever mix of watches and calls is in flight.
//!
//! Oldest first packs the traffic onto as few connections as the budget allows, as client-go's
//! one connection does: each read and write of a busy connection carries several frames, where
//! spreading the same traffic evenly (least busy first) over the 13 connections that 500
//! maintenances open at start-up made a read, a write and a wake-up for almost every frame.
//!
//! Over HTTP/1.1 (a server without HTTP/2) a lane is a pool of connections, one per request in
//! flight, as hyper always does; the budget then only decides which pool a request joins.
//!
//! A lane's first request goes alone. Over TLS the protocol is only known once ALPN has picked
//! it, so hyper cannot tell that requests arriving while the first connection is being set up
//! could share it: each would open a connection of its own (41 for a burst of 50 maintenances
//! on a real API server). The others wait for the first response's headers, by which time the
//! connection is in the pool, shared if it is HTTP/2.
//!
//! A request the server never processed is sent again, on a fresh connection: one the server
//! refused with GOAWAY (its stream above the GOAWAY's last stream, or opened after it: an API
//! server run with `--goaway-chance` behind a load balancer, or one shutting down gracefully,
//! refused about one request in a hundred that way on a real kube-apiserver) or with
//! REFUSED_STREAM. RFC 9113 (section 8.7) guarantees such a request had no effect, so even an
//! eviction is safe to send again; hyper does not, because it no longer has the request by
//! then. Request bodies are therefore kept (they are small: nmo makes no streaming uploads).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::Connect;
use hyper_util::client::legacy::{Builder, Client, Error};
use tower::{BoxError, Service};

/// How many times a request the server never processed is sent again.
const RESENDS: usize = 3;

/// The body every lane's client sends: a request's body, kept for a resend.
type SentBody = Full<Bytes>;

/// Requests spread over lanes of at most `budget` streams each.
pub struct Lanes<C> {
    shared: Arc<Shared<C>>,
}

impl<C> Clone for Lanes<C> {
    fn clone(&self) -> Self {
        Lanes {
            shared: self.shared.clone(),
        }
    }
}

struct Shared<C> {
    builder: Builder,
    connector: C,
    budget: usize,
    lanes: Mutex<Vec<Arc<Lane<C>>>>,
}

struct Lane<C> {
    client: Client<C, SentBody>,
    /// Requests sent on this lane whose response body is still open (or not yet received).
    in_flight: Arc<AtomicUsize>,
    /// A request on this lane was answered: its connection is in hyper's pool.
    connected: AtomicBool,
    /// Held by the request that goes alone until the lane is `connected`.
    first: tokio::sync::Mutex<()>,
}

impl<C> Lane<C>
where
    C: Connect + Clone + Send + Sync + 'static,
{
    /// Sends `request`, alone while the lane has no connection yet (see the module docs).
    async fn send(&self, request: Request<SentBody>) -> Result<Response<Incoming>, Error> {
        if !self.connected.load(Ordering::Acquire) {
            let _alone = self.first.lock().await;
            if !self.connected.load(Ordering::Acquire) {
                let response = self.client.request(request).await;
                // A failed first request leaves the next one to go alone in turn.
                if response.is_ok() {
                    self.connected.store(true, Ordering::Release);
                }
                return response;
            }
        }
        self.client.request(request).await
    }
}

impl<C> Lanes<C>
where
    C: Connect + Clone + Send + Sync + 'static,
{
    /// Lanes of clients built by `builder` over `connector`, each with at most `budget` requests
    /// in flight (at least 1).
    pub fn new(builder: Builder, connector: C, budget: usize) -> Self {
        Lanes {
            shared: Arc::new(Shared {
                builder,
                connector,
                budget: budget.max(1),
                lanes: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Lanes opened so far.
    pub fn lanes(&self) -> usize {
        self.shared
            .lanes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Takes a stream on the oldest lane that has one to spare, opening a lane if none has.
    fn take_stream(&self) -> (Arc<Lane<C>>, Stream) {
        let mut lanes = self
            .shared
            .lanes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let with_room = lanes
            .iter()
            .find(|lane| lane.in_flight.load(Ordering::Relaxed) < self.shared.budget)
            .cloned();
        let lane = with_room.unwrap_or_else(|| {
            let lane = Arc::new(Lane {
                client: self.shared.builder.build(self.shared.connector.clone()),
                in_flight: Arc::new(AtomicUsize::new(0)),
                connected: AtomicBool::new(false),
                first: tokio::sync::Mutex::new(()),
            });
            lanes.push(lane.clone());
            lane
        });
        // Counted while the lock is held, so two requests never both see the last free stream.
        lane.in_flight.fetch_add(1, Ordering::Relaxed);
        let stream = Stream {
            in_flight: lane.in_flight.clone(),
        };
        (lane, stream)
    }
}

/// A stream taken on a lane; given back when dropped (with the response body, or with the
/// request when it fails or is cancelled).
struct Stream {
    in_flight: Arc<AtomicUsize>,
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<C, B> Service<Request<B>> for Lanes<C>
where
    C: Connect + Clone + Send + Sync + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<LaneBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // hyper's client is always ready: it queues in its pool, not here.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let lanes = self.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let body = body.collect().await.map_err(Into::into)?.to_bytes();
            let mut resends = 0;
            loop {
                let (lane, stream) = lanes.take_stream();
                match lane.send(copy(&parts, body.clone())).await {
                    Ok(response) => {
                        return Ok(response.map(|body| LaneBody {
                            body,
                            _stream: stream,
                        }));
                    }
                    Err(error) if resends < RESENDS && never_processed(&error) => {
                        resends += 1;
                        tracing::debug!(%error, resends, "the server refused the request unprocessed; sending it again");
                    }
                    Err(error) => return Err(error.into()),
                }
            }
        })
    }
}

/// A request of `parts` with `body` (what hyper reads of a request: its method, URI, version
/// and headers).
fn copy(parts: &http::request::Parts, body: Bytes) -> Request<SentBody> {
    let mut request = Request::new(Full::new(body));
    *request.method_mut() = parts.method.clone();
    *request.uri_mut() = parts.uri.clone();
    *request.version_mut() = parts.version;
    *request.headers_mut() = parts.headers.clone();
    request
}

/// Whether `error` says the server refused the request without processing it: a GOAWAY
/// without error (the request's stream was beyond its last stream) or REFUSED_STREAM.
fn never_processed(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(h2) = error.downcast_ref::<h2::Error>() {
            return h2.is_remote()
                && match h2.reason() {
                    Some(h2::Reason::REFUSED_STREAM) => true,
                    Some(h2::Reason::NO_ERROR) => h2.is_go_away(),
                    _ => false,
                };
        }
        cause = error.source();
    }
    false
}

/// A response body that holds its lane's stream until it is dropped.
pub struct LaneBody {
    body: Incoming,
    _stream: Stream,
}

impl Body for LaneBody {
    type Data = bytes::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::rt::TokioExecutor;

    use super::*;

    #[tokio::test]
    async fn requests_fill_the_oldest_lane_with_room_first() {
        let lanes: Lanes<HttpConnector> = Lanes::new(
            Client::builder(TokioExecutor::new()),
            HttpConnector::new(),
            2,
        );
        let (first, a) = lanes.take_stream();
        let (same, _b) = lanes.take_stream();
        assert!(Arc::ptr_eq(&first, &same));
        // The first lane is at its budget: a second lane opens.
        let (second, c) = lanes.take_stream();
        assert!(!Arc::ptr_eq(&first, &second));
        assert_eq!(lanes.lanes(), 2);
        // One stream free on the first lane, two on the second: the first still comes first.
        drop(a);
        drop(c);
        let (next, _d) = lanes.take_stream();
        assert!(Arc::ptr_eq(&next, &first));
        assert_eq!(lanes.lanes(), 2);
    }
}
