//! Puts a throttling 429's `Retry-After` header where kube lets nmo read it.
//!
//! A real kube-apiserver refusing a request under API Priority and Fairness answers 429 with a
//! plain-text body ("Too many requests, please try again later.") and the wait in a
//! `Retry-After` header (1 s on kube-apiserver 1.36). kube turns a body that is not a JSON
//! `Status` into a `Status` of its own, keeping the text and the code but not the header, so
//! nmo's error handling (`cluster::errors`, `cluster::watch_retry`), which reads
//! `details.retryAfterSeconds`, never saw the server's wait and came back at once, into the
//! same queue that had just refused it. This layer rewrites such a response's body before kube
//! reads it: a JSON `Status` as the API server writes its other refusals (code 429, reason
//! `TooManyRequests`, the original text as the message), with the header's seconds in
//! `details.retryAfterSeconds`. A JSON `Status` that has no `retryAfterSeconds` gets the
//! header's; one that has its own keeps it. Other responses pass untouched, their bodies
//! still streaming.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Either, Full};
use serde_json::{Map, Value, json};
use tower::{BoxError, Layer, Service};

/// Wraps a service in [`RetryAfter`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RetryAfterLayer;

impl<S> Layer<S> for RetryAfterLayer {
    type Service = RetryAfter<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RetryAfter { inner }
    }
}

/// A service whose throttling 429s carry their `Retry-After` in a JSON `Status` body.
#[derive(Debug, Clone)]
pub struct RetryAfter<S> {
    inner: S,
}

/// A response body: the inner service's, or the rewritten 429's.
pub type RetryAfterBody<B> = Either<B, Full<Bytes>>;

impl<S, Request, B> Service<Request> for RetryAfter<S>
where
    S: Service<Request, Response = Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<RetryAfterBody<B>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let responding = self.inner.call(request);
        Box::pin(async move {
            let response = responding.await.map_err(Into::into)?;
            let Some(seconds) = throttled_retry_after(&response) else {
                return Ok(response.map(Either::Left));
            };
            let (mut parts, body) = response.into_parts();
            let body = body.collect().await.map_err(Into::into)?.to_bytes();
            let body = with_retry_after(body, seconds);
            parts
                .headers
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            // The length is the new body's; kube reads the body to its end anyway.
            parts.headers.remove(CONTENT_LENGTH);
            Ok(Response::from_parts(parts, Either::Right(Full::new(body))))
        })
    }
}

/// The seconds of a 429's `Retry-After`, when it gives them as a positive number (what the API
/// server sends; the HTTP-date form is left alone, no server nmo talks to uses it).
fn throttled_retry_after<B>(response: &Response<B>) -> Option<u32> {
    if response.status() != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    response
        .headers()
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|seconds| *seconds > 0)
}

/// `body` as a JSON `Status` with `details.retryAfterSeconds`: its own if it has them, else
/// `seconds`. A body that is not a JSON `Status` becomes the message of a new one.
fn with_retry_after(body: Bytes, seconds: u32) -> Bytes {
    let parsed = serde_json::from_slice::<Value>(&body).ok();
    let mut status = match parsed {
        Some(Value::Object(status)) if status.get("kind") == Some(&json!("Status")) => status,
        _ => {
            let message = String::from_utf8_lossy(&body).trim().to_string();
            let mut status = Map::new();
            status.insert("kind".into(), json!("Status"));
            status.insert("apiVersion".into(), json!("v1"));
            status.insert("metadata".into(), json!({}));
            status.insert("status".into(), json!("Failure"));
            status.insert("message".into(), json!(message));
            status.insert("reason".into(), json!("TooManyRequests"));
            status.insert("code".into(), json!(429));
            status
        }
    };
    let details = status
        .entry("details")
        .or_insert_with(|| Value::Object(Map::new()));
    if !details.is_object() {
        *details = Value::Object(Map::new());
    }
    if let Value::Object(details) = details {
        let has_own = details
            .get("retryAfterSeconds")
            .and_then(Value::as_u64)
            .is_some_and(|own| own > 0);
        if has_own {
            return body;
        }
        details.insert("retryAfterSeconds".to_string(), json!(seconds));
    }
    match serde_json::to_vec(&Value::Object(status)) {
        Ok(rewritten) => Bytes::from(rewritten),
        // A map of JSON values always serializes; should it not, kube reads the original.
        Err(_) => body,
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http::Request;
    use kube::core::Status;
    use tower::{ServiceExt, service_fn};

    use super::*;

    /// What a real kube-apiserver 1.36 answers a request API Priority and Fairness rejects.
    const APF_TEXT: &str = "Too many requests, please try again later.\n";

    /// A service answering every request with `status`, `retry_after` (if any) and `body`.
    async fn answered(
        status: u16,
        retry_after: Option<&'static str>,
        body: &'static str,
    ) -> Status {
        let stub = service_fn(move |_: Request<()>| async move {
            let mut response = Response::builder()
                .status(status)
                .header(CONTENT_TYPE, "text/plain; charset=utf-8")
                .header(CONTENT_LENGTH, body.len());
            if let Some(seconds) = retry_after {
                response = response.header(RETRY_AFTER, seconds);
            }
            Ok::<_, Infallible>(
                response
                    .body(Full::new(Bytes::from_static(body.as_bytes())))
                    .unwrap(),
            )
        });
        let response = RetryAfterLayer
            .layer(stub)
            .oneshot(Request::new(()))
            .await
            .unwrap();
        let code = response.status();
        assert_eq!(code.as_u16(), status);
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        // What kube does with an error response: a JSON Status is the server's, anything else
        // becomes a Status of kube's making without details.
        crate::cluster::watch_session::api_status(code, &bytes)
    }

    fn retry_after_seconds(status: &Status) -> u32 {
        status
            .details
            .as_ref()
            .map(|d| d.retry_after_seconds)
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn a_plain_text_429_with_retry_after_becomes_a_status_with_its_seconds() {
        let status = answered(429, Some("1"), APF_TEXT).await;
        assert_eq!(status.code, 429);
        assert_eq!(status.reason, "TooManyRequests");
        assert_eq!(status.message, APF_TEXT.trim());
        assert_eq!(retry_after_seconds(&status), 1);
    }

    #[tokio::test]
    async fn a_json_status_without_retry_after_seconds_gets_the_headers_and_keeps_its_causes() {
        let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
            "message":"Cannot evict pod as it would violate the pod's disruption budget.",
            "reason":"TooManyRequests","details":{"causes":[{"reason":"DisruptionBudget",
            "message":"The disruption budget web needs 2 healthy pods and has 2 currently"}]},
            "code":429}"#;
        let status = answered(429, Some("7"), body).await;
        assert_eq!(retry_after_seconds(&status), 7);
        let causes = &status.details.as_ref().unwrap().causes;
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].reason, "DisruptionBudget");
        assert!(status.message.starts_with("Cannot evict pod"));
    }

    #[tokio::test]
    async fn a_status_with_its_own_retry_after_seconds_keeps_them() {
        let body = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"slow down",
            "reason":"TooManyRequests","details":{"retryAfterSeconds":5},"code":429}"#;
        let status = answered(429, Some("1"), body).await;
        assert_eq!(retry_after_seconds(&status), 5);
    }

    #[tokio::test]
    async fn other_responses_pass_untouched() {
        // No Retry-After: nothing to pass on.
        let status = answered(429, None, APF_TEXT).await;
        assert_eq!(retry_after_seconds(&status), 0);
        assert_eq!(status.reason, "Failed to parse error data");
        // Not a 429, or a header that is not a number of seconds.
        let status = answered(503, Some("3"), "unavailable").await;
        assert_eq!(retry_after_seconds(&status), 0);
        let status = answered(429, Some("Wed, 21 Oct 2015 07:28:00 GMT"), APF_TEXT).await;
        assert_eq!(retry_after_seconds(&status), 0);
    }

    #[tokio::test]
    async fn through_kube_the_retry_after_reaches_the_error() {
        let stub = service_fn(|_: Request<kube::client::Body>| async {
            let response = Response::builder()
                .status(429)
                .header(RETRY_AFTER, "2")
                .body(Full::new(Bytes::from_static(APF_TEXT.as_bytes())))
                .unwrap();
            Ok::<_, Infallible>(response)
        });
        let client =
            kube::client::ClientBuilder::new(RetryAfterLayer.layer(stub), "default").build();
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::default_namespaced(client);
        match pods.get("p").await {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 429);
                assert_eq!(retry_after_seconds(&status), 2);
            }
            other => panic!("expected a 429, got {other:?}"),
        }
    }
}
