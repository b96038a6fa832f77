//! A bound on the client's calls in flight (every request but a watch).
//!
//! API Priority and Fairness gives each flow (for nmo: its ServiceAccount) a few queues of a
//! priority level (shuffle sharding: 6 queues of 50 requests on the built-in `workload-low`)
//! and answers 429 to whatever finds them full. An operator that sends whatever its actors ask
//! for the moment they ask fills them whenever the API server slows down: at 1,000 maintenances
//! on a 2-core control plane, nmo's status writes, lease creates and watch LISTs piled up
//! behind the evictions and the server refused about one request in sixteen. The benchmark's
//! floor, which keeps 32 requests in flight, saw none. So calls wait here, in the client, for
//! a place: `--max-evictions-in-flight` plus
//! [`CALLS_BESIDE_EVICTIONS`](nmo_actors::config::defaults::CALLS_BESIDE_EVICTIONS) of them (64
//! with the defaults). With at most that many in flight, the server's queues for nmo never
//! fill, and a call waits for a place about as long as it would have waited in the server's
//! queue. The actors' calls take their turn before this, with as many places
//! (`nmo_actors::call_deadline`), before their requests are built; what still waits here is
//! the rest: the shared watches' LISTs, the DaemonSet and budget lookups.
//!
//! Two kinds of request take no place. Watches: each holds its request for minutes, and the
//! server counts a watch's seat only while it starts. The leader election's lease: its
//! renewal goes through this client every 2 s, and must never wait behind a burst of status
//! writes until its renew deadline has passed (controller-runtime gives leader election a
//! client of its own for the same reason). The node leases wait like any call: one is created
//! per starting maintenance, in the bursts this bound is for, and renewed every 20 minutes.
//! A call that waits here counts against its own deadline (the caller's timeout wraps the
//! whole request), so a client whose places are all taken by calls that hang fails its callers
//! on time rather than queueing them for ever.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Request;
use tokio::sync::Semaphore;
use tower::{BoxError, Layer, Service, ServiceExt};

use crate::leader::LEADER_ELECTION_ID;

/// Calls in flight at most for a client whose evictions keep `evictions` in flight at most:
/// as many places beside them as the actors keep
/// ([`nmo_actors::config::defaults::CALLS_BESIDE_EVICTIONS`]).
pub fn calls_in_flight(evictions: usize) -> usize {
    evictions.saturating_add(nmo_actors::config::defaults::CALLS_BESIDE_EVICTIONS)
}

/// Wraps a service in [`CallLimit`], sharing one set of places among its clones.
#[derive(Debug, Clone)]
pub struct CallLimitLayer {
    places: Arc<Semaphore>,
}

impl CallLimitLayer {
    /// A layer whose services keep at most `calls` calls in flight together (at least one).
    pub fn new(calls: usize) -> Self {
        CallLimitLayer {
            places: Arc::new(Semaphore::new(calls.max(1))),
        }
    }
}

impl<S> Layer<S> for CallLimitLayer {
    type Service = CallLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CallLimit {
            inner,
            places: self.places.clone(),
        }
    }
}

/// A service that lets a call through only with a free place; watches and the leader
/// election's lease calls pass at once.
#[derive(Debug, Clone)]
pub struct CallLimit<S> {
    inner: S,
    places: Arc<Semaphore>,
}

/// Whether `request` goes without a place: a watch (`?watch=true`, or `watch=1`), which holds
/// its stream open, or a call on the leader election's lease (see the module's doc).
fn takes_no_place<B>(request: &Request<B>) -> bool {
    let uri = request.uri();
    let watch = uri.query().is_some_and(|query| {
        query
            .split('&')
            .any(|pair| pair == "watch=true" || pair == "watch=1")
    });
    let path = uri.path();
    let leader_lease = path.starts_with("/apis/coordination.k8s.io/")
        && path
            .strip_suffix(LEADER_ELECTION_ID)
            .is_some_and(|rest| rest.ends_with("/leases/"));
    watch || leader_lease
}

impl<S, B, R> Service<Request<B>> for CallLimit<S>
where
    S: Service<Request<B>, Response = R> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = R;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<R, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The service made ready goes with the request; this one is a fresh clone.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        if takes_no_place(&request) {
            let call = inner.call(request);
            return Box::pin(async move { call.await.map_err(Into::into) });
        }
        let places = self.places.clone();
        Box::pin(async move {
            let place = match places.clone().try_acquire_owned() {
                Ok(place) => place,
                Err(_) => {
                    let place = places.acquire_owned().await.map_err(BoxError::from)?;
                    // Made ready before the wait; a service may have changed its mind since.
                    inner = inner.ready_oneshot().await.map_err(Into::into)?;
                    place
                }
            };
            // The place is held until the response's head arrives: the server has finished
            // with the call by then (its body, a few KiB, follows at once).
            let response = inner.call(request).await.map_err(Into::into);
            drop(place);
            response
        })
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tower::service_fn;

    use super::*;

    /// A service that answers each request after 100 ms, recording the most requests it ever
    /// had in flight together.
    fn slow_server() -> (
        impl Service<Request<()>, Response = (), Error = Infallible, Future = impl Send>
        + Clone
        + Send
        + 'static,
        Arc<AtomicUsize>,
    ) {
        let in_flight = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let seen = most.clone();
        let service = service_fn(move |_: Request<()>| {
            let (in_flight, most) = (in_flight.clone(), most.clone());
            async move {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, Infallible>(())
            }
        });
        (service, seen)
    }

    fn request(uri: &str) -> Request<()> {
        Request::builder().uri(uri).body(()).expect("a request")
    }

    async fn send(
        client: CallLimit<
            impl Service<Request<()>, Response = (), Error = Infallible, Future = impl Send + 'static>
            + Clone
            + Send
            + 'static,
        >,
        uri: &'static str,
        n: usize,
    ) {
        let calls = (0..n).map(|_| {
            let mut client = client.clone();
            async move {
                client
                    .ready()
                    .await
                    .expect("ready")
                    .call(request(uri))
                    .await
                    .expect("an answer");
            }
        });
        futures::future::join_all(calls).await;
    }

    #[tokio::test(start_paused = true)]
    async fn no_more_calls_than_the_limit_are_in_flight_and_every_one_is_answered() {
        let (service, most) = slow_server();
        let client = CallLimitLayer::new(8).layer(service);
        let started = tokio::time::Instant::now();
        send(client, "/api/v1/namespaces/a/pods/p/eviction", 40).await;
        assert_eq!(most.load(Ordering::SeqCst), 8);
        // 40 calls, 8 at a time, 100 ms each: five rounds.
        assert_eq!(started.elapsed(), Duration::from_millis(500));
    }

    #[tokio::test(start_paused = true)]
    async fn watches_take_no_place() {
        let (service, most) = slow_server();
        let client = CallLimitLayer::new(2).layer(service);
        send(
            client,
            "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&watch=true&timeoutSeconds=290",
            10,
        )
        .await;
        assert_eq!(most.load(Ordering::SeqCst), 10);
    }

    #[tokio::test(start_paused = true)]
    async fn the_leader_lease_takes_no_place() {
        let (service, most) = slow_server();
        let client = CallLimitLayer::new(2).layer(service);
        send(
            client,
            "/apis/coordination.k8s.io/v1/namespaces/nmo/leases/135b1886.medik8s.io",
            10,
        )
        .await;
        assert_eq!(most.load(Ordering::SeqCst), 10);
    }

    #[test]
    fn watches_and_the_leader_lease_are_told_by_their_query_and_path_alone() {
        assert!(takes_no_place(&request("/api/v1/pods?watch=true")));
        assert!(takes_no_place(&request(
            "/api/v1/pods?labelSelector=a&watch=1"
        )));
        assert!(takes_no_place(&request(
            "/apis/coordination.k8s.io/v1/namespaces/nmo-system/leases/135b1886.medik8s.io"
        )));
        // A node lease waits like any call.
        assert!(!takes_no_place(&request(
            "/apis/coordination.k8s.io/v1/namespaces/medik8s-leases/leases/node-1"
        )));
        assert!(!takes_no_place(&request(
            "/apis/coordination.k8s.io/v1/namespaces/medik8s-leases/leases"
        )));
        assert!(!takes_no_place(&request("/api/v1/pods?watch=false")));
        assert!(!takes_no_place(&request(
            "/api/v1/namespaces/watch=true/pods"
        )));
        assert!(!takes_no_place(&request("/api/v1/pods")));
        assert!(!takes_no_place(&request(
            "/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances/nm1/status"
        )));
    }
}
