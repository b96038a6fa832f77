//! The HTTP client of the OTLP/HTTP trace exporter (`OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`):
//! hyper with rustls and ring, the stack kube's client already uses, trusting the system's
//! CA certificates.
//!
//! The SDK's batch processor exports from a thread of its own, outside any tokio runtime,
//! where hyper can neither spawn its connection tasks nor time out; so every request is
//! spawned onto the runtime the client was built on and awaited from the exporter's thread.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http::{Request, Response};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use opentelemetry_http::hyper::HyperClient;
use opentelemetry_http::{HttpClient, HttpError};
use tokio::runtime::Handle;

/// Why the client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum HttpClientError {
    /// The system's CA certificates could not be loaded.
    #[error("cannot load the system's CA certificates: {0}")]
    Roots(#[source] std::io::Error),
    /// Built outside a tokio runtime.
    #[error("the OTLP/HTTP client must be built inside a tokio runtime: {0}")]
    NoRuntime(#[source] tokio::runtime::TryCurrentError),
}

/// An OTLP/HTTP client whose requests run on the tokio runtime it was built on.
#[derive(Debug, Clone)]
pub struct RuntimeHttpClient {
    inner: HyperClient<HttpsConnector<HttpConnector>>,
    runtime: Handle,
}

impl RuntimeHttpClient {
    /// A client for `http://` and `https://` endpoints, each request cut off after `timeout`.
    /// Must be called inside a tokio runtime.
    pub fn new(timeout: Duration) -> Result<Self, HttpClientError> {
        let runtime = Handle::try_current().map_err(HttpClientError::NoRuntime)?;
        let connector = HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(rustls::crypto::ring::default_provider())
            .map_err(HttpClientError::Roots)?
            .https_or_http()
            .enable_http1()
            .build();
        Ok(RuntimeHttpClient {
            inner: HyperClient::new(connector, timeout, None),
            runtime,
        })
    }
}

#[async_trait]
impl HttpClient for RuntimeHttpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let inner = self.inner.clone();
        self.runtime
            .spawn(async move { inner.send_bytes(request).await })
            .await
            .map_err(|join| Box::new(join) as HttpError)?
    }
}
