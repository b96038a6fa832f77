//! One pause for all of a client's requests once API Priority and Fairness throttles one.
//!
//! A real kube-apiserver that has no seat and no queue room left for a request of nmo's
//! priority level answers 429 in plain text with a `Retry-After` (1 s on 1.36): the level is
//! full, whatever the object. Retrying only that request later, while every other node actor
//! keeps sending, keeps the level full: at 500 nodes a run saw more than one such 429 for every
//! ten requests. So the first throttled answer holds every request of the client (evictions,
//! status writes, lease renewals, watch starts) until the server's `Retry-After` has passed,
//! and each held request then waits a random extra share of it, so that the held requests do
//! not all come back in the same instant.
//!
//! A 429 that is a JSON `Status` is the server speaking for an object (an eviction a
//! disruption budget refuses, or a webhook's verdict): it says nothing about the level, and is
//! left to the caller.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{Response, StatusCode};
use rand::Rng;
use tokio::time::Instant;
use tower::{BoxError, Layer, Service, ServiceExt};

/// The wait when a throttled answer gives none: kube-apiserver's own `Retry-After`.
const DEFAULT_WAIT: Duration = Duration::from_secs(1);
/// The most a held request waits past the hold, as a share of the hold left when it came.
const SPREAD: f64 = 0.5;

/// When the client's requests may go again, shared by every clone of the client.
#[derive(Debug, Clone, Default)]
pub struct FlowHold {
    until: Arc<Mutex<Option<Instant>>>,
    throttled_answers: Arc<std::sync::atomic::AtomicU64>,
}

impl FlowHold {
    /// The level is full: hold every request for `wait` from now (a longer hold already
    /// running stays).
    pub fn throttled(&self, wait: Duration) {
        let until = Instant::now() + wait;
        let mut held = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        if held.is_none_or(|current| current < until) {
            *held = Some(until);
        }
        self.throttled_answers
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// How long a request made now waits: what is left of the hold, plus up to [`SPREAD`]
    /// of it at random. Zero when nothing holds.
    pub fn wait(&self) -> Duration {
        self.wait_with(rand::rng().random_range(0.0..=SPREAD))
    }

    fn wait_with(&self, spread: f64) -> Duration {
        let held = *self.until.lock().unwrap_or_else(PoisonError::into_inner);
        let left = held
            .map(|until| until.saturating_duration_since(Instant::now()))
            .unwrap_or_default();
        left + left.mul_f64(spread)
    }

    /// Throttled answers seen so far.
    pub fn throttled_answers(&self) -> u64 {
        self.throttled_answers
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Wraps a service in [`FlowHoldService`] sharing `hold`.
#[derive(Debug, Clone)]
pub struct FlowHoldLayer {
    hold: FlowHold,
}

impl FlowHoldLayer {
    /// A layer whose services share `hold`.
    pub fn new(hold: FlowHold) -> Self {
        FlowHoldLayer { hold }
    }
}

impl<S> Layer<S> for FlowHoldLayer {
    type Service = FlowHoldService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        FlowHoldService {
            inner,
            hold: self.hold.clone(),
        }
    }
}

/// A service that holds its requests while the server throttles.
#[derive(Debug, Clone)]
pub struct FlowHoldService<S> {
    inner: S,
    hold: FlowHold,
}

impl<S, Request, B> Service<Request> for FlowHoldService<S>
where
    S: Service<Request, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    Request: Send + 'static,
{
    type Response = Response<B>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        // The service made ready goes with the request; this one is a fresh clone.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let hold = self.hold.clone();
        Box::pin(async move {
            let wait = hold.wait();
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
                // Made ready before the wait; a service may have changed its mind since.
                inner = inner.ready_oneshot().await.map_err(Into::into)?;
            }
            let response = inner.call(request).await.map_err(Into::into)?;
            if let Some(wait) = level_full(&response) {
                hold.throttled(wait);
            }
            Ok(response)
        })
    }
}

/// The server's wait when `response` is API Priority and Fairness refusing a request: a 429
/// that is not a JSON `Status` (see the module's doc).
fn level_full<B>(response: &Response<B>) -> Option<Duration> {
    if response.status() != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    let json = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if json {
        return None;
    }
    let seconds = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok())
        .filter(|seconds| *seconds > 0);
    Some(seconds.map_or(DEFAULT_WAIT, Duration::from_secs))
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use bytes::Bytes;
    use http::Request;
    use http_body_util::Full;
    use tower::service_fn;

    use super::*;

    /// A service answering its first `throttled` requests as API Priority and Fairness does
    /// (plain text, `Retry-After: 1`), then 200; it counts the requests it saw.
    fn server(
        throttled: usize,
        content_type: &'static str,
    ) -> (
        impl Service<
            Request<()>,
            Response = Response<Full<Bytes>>,
            Error = Infallible,
            Future = impl Send,
        > + Clone
        + Send
        + 'static,
        Arc<AtomicUsize>,
    ) {
        let seen = Arc::new(AtomicUsize::new(0));
        let counter = seen.clone();
        let service = service_fn(move |_: Request<()>| {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            async move {
                let response = if n < throttled {
                    Response::builder()
                        .status(429)
                        .header(CONTENT_TYPE, content_type)
                        .header(RETRY_AFTER, "1")
                        .body(Full::new(Bytes::from_static(b"Too many requests\n")))
                } else {
                    Response::builder()
                        .status(200)
                        .body(Full::new(Bytes::new()))
                };
                Ok::<_, Infallible>(response.expect("a response"))
            }
        });
        (service, seen)
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttled_answer_holds_the_next_requests_for_the_servers_wait() {
        let (service, _) = server(1, "text/plain; charset=utf-8");
        let hold = FlowHold::default();
        let mut client = FlowHoldLayer::new(hold.clone()).layer(service);
        let first = client
            .ready()
            .await
            .expect("ready")
            .call(Request::new(()))
            .await
            .expect("an answer");
        assert_eq!(first.status(), 429);
        assert_eq!(hold.throttled_answers(), 1);
        let asked = Instant::now();
        let second = client
            .ready()
            .await
            .expect("ready")
            .call(Request::new(()))
            .await
            .expect("an answer");
        assert_eq!(second.status(), 200);
        let waited = asked.elapsed();
        assert!(
            waited >= Duration::from_secs(1) && waited <= Duration::from_millis(1500),
            "held for {waited:?}"
        );
        // The hold is over: the next request goes at once.
        let asked = Instant::now();
        client
            .ready()
            .await
            .expect("ready")
            .call(Request::new(()))
            .await
            .expect("an answer");
        assert!(asked.elapsed() < Duration::from_millis(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_budgets_json_429_holds_nothing() {
        let (service, seen) = server(1, "application/json");
        let hold = FlowHold::default();
        let client = FlowHoldLayer::new(hold.clone()).layer(service);
        for _ in 0..2 {
            client
                .clone()
                .oneshot(Request::new(()))
                .await
                .expect("an answer");
        }
        assert_eq!(hold.throttled_answers(), 0);
        assert_eq!(hold.wait(), Duration::ZERO);
        assert_eq!(seen.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn held_requests_come_back_spread_over_half_the_hold() {
        let hold = FlowHold::default();
        hold.throttled(Duration::from_secs(2));
        assert_eq!(hold.wait_with(0.0), Duration::from_secs(2));
        assert_eq!(hold.wait_with(SPREAD), Duration::from_secs(3));
        // A shorter hold does not cut a longer one short.
        hold.throttled(Duration::from_secs(1));
        assert_eq!(hold.wait_with(0.0), Duration::from_secs(2));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(hold.wait(), Duration::ZERO);
    }

    #[test]
    fn only_a_plain_429_is_the_level_being_full() {
        let answer = |status: u16, content_type: &str, retry_after: Option<&str>| {
            let mut response = Response::builder()
                .status(status)
                .header(CONTENT_TYPE, content_type);
            if let Some(seconds) = retry_after {
                response = response.header(RETRY_AFTER, seconds);
            }
            level_full(&response.body(()).expect("a response"))
        };
        assert_eq!(
            answer(429, "text/plain", Some("3")),
            Some(Duration::from_secs(3))
        );
        assert_eq!(answer(429, "text/plain", None), Some(DEFAULT_WAIT));
        assert_eq!(answer(429, "application/json", Some("3")), None);
        assert_eq!(answer(503, "text/plain", Some("3")), None);
        assert_eq!(answer(200, "text/plain", None), None);
    }
}
