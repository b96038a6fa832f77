//! A kube client that multiplexes its requests and watches over HTTP/2 when the API server
//! offers it, HTTP/1.1 otherwise.
//!
//! kube's own client speaks HTTP/1.1 only (kube-rs/kube#1923, and the open PR #1823): every
//! watch then holds a connection of its own, with its own TLS session and buffers, and an
//! operator that watches two things per node in maintenance opens a thousand connections for
//! 500 nodes. client-go multiplexes everything over HTTP/2 instead. kube builds a client from any
//! tower service, so this module builds that service: hyper-util's client with HTTP/2 on, over
//! TLS offering `h2` and `http/1.1` (ALPN; a real kube-apiserver picks `h2`), with kube's own
//! pieces (`ConfigExt`: base URI, authentication, extra headers, TLS client configuration) and
//! the `kube::Config`'s connect, read and write timeouts applied as kube's builder applies them.
//!
//! What kube-rs#1923 worried about: the upgrade calls (exec, attach, port-forward, which switch
//! the connection to a WebSocket) need HTTP/1.1, since an HTTP/2 connection cannot be upgraded
//! (RFC 8441's extended CONNECT is not what the API server speaks to clients). nmo makes no such
//! call; a client built here must not be used for them. What else differs from kube's builder:
//! no HTTP proxy (nmo's kube has no proxy feature either), no debug span per request (nmo counts
//! its requests itself, `observability::api_metrics`), and an exec plugin's client certificate
//! is used but its expiry is not passed on (`Client::valid_until` is kube's private business).
//!
//! With one connection for everything, two more things matter:
//! - A server caps the streams of a connection (`--http2-max-streams-per-connection`); a
//!   request past the cap waits, and watches never give their stream back. [`lanes`] keeps
//!   each connection below a budget and opens another when all are full.
//! - A dead connection (a half-open TCP session) would silence every watch at once: HTTP/2
//!   PINGs detect it, as client-go's `ReadIdleTimeout`/`PingTimeout` do.
//!
//! A throttling 429 from a real API server (API Priority and Fairness) is plain text with a
//! `Retry-After` header, which kube drops: [`retry_after`] puts the header's wait into the
//! JSON `Status` that nmo's error handling reads, and [`flow_hold`] holds every request of the
//! client until that wait has passed, since the server throttles a priority level, not one
//! object. [`call_limit`] keeps the calls in flight few enough that the level's queues for
//! nmo never fill in the first place.
//!
//! An `http://` server (the simulator, `nmo sim`) has no TLS and so no ALPN: HTTP/1.1, unless
//! [`ApiClientOptions::http2_prior_knowledge`] says the server speaks HTTP/2 as it is (h2c).

pub mod call_limit;
pub mod connections;
pub mod flow_hold;
pub mod lanes;
pub mod operator_client;
pub mod retry_after;
#[cfg(test)]
mod tests;

use std::time::Duration;

use hyper_rustls::{FixedServerNameResolver, HttpsConnectorBuilder};
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::retry::RetryPolicy;
use kube::client::{ClientBuilder, ConfigExt};
use tower::retry::RetryLayer;
use tower::{BoxError, ServiceBuilder};

use call_limit::CallLimitLayer;
pub use connections::ConnectionCount;
use connections::CountingConnector;
use flow_hold::{FlowHold, FlowHoldLayer};
use lanes::Lanes;
pub use operator_client::{OperatorClient, client_config, cluster_config};
use retry_after::RetryAfterLayer;

/// Streams one connection carries at most. RFC 9113 recommends servers allow at least 100;
/// Go's HTTP/2 server (kube-apiserver's `--http2-max-streams-per-connection` at 0) allows 250,
/// and a connection also needs room for the calls made while its watches run.
pub const DEFAULT_STREAMS_PER_CONNECTION: usize = 100;
/// How long a connection may be silent before it is PINGed (client-go's `ReadIdleTimeout`).
pub const DEFAULT_KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// How long a PING may go unanswered before the connection is given up (client-go's
/// `PingTimeout`); its requests fail and its watches restart on a new connection.
pub const DEFAULT_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(15);

/// How the client uses its connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiClientOptions {
    /// Requests in flight (watches included) on one connection at most; more open another.
    pub max_streams_per_connection: usize,
    /// Speak HTTP/2 without TLS (h2c, prior knowledge) to an `http://` server. Ignored for
    /// `https://`, where the server says what it speaks (ALPN).
    pub http2_prior_knowledge: bool,
    /// PING a connection after this long without traffic (None: never).
    pub keep_alive_interval: Option<Duration>,
    /// Give a connection up when a PING is not answered within this.
    pub keep_alive_timeout: Duration,
    /// Calls (requests other than watches) in flight at most; more wait in the client.
    pub max_calls_in_flight: usize,
}

impl Default for ApiClientOptions {
    fn default() -> Self {
        ApiClientOptions {
            max_streams_per_connection: DEFAULT_STREAMS_PER_CONNECTION,
            http2_prior_knowledge: false,
            keep_alive_interval: Some(DEFAULT_KEEP_ALIVE_INTERVAL),
            keep_alive_timeout: DEFAULT_KEEP_ALIVE_TIMEOUT,
            max_calls_in_flight: call_limit::calls_in_flight(
                nmo_actors::config::defaults::EVICTION_MAX_IN_FLIGHT,
            ),
        }
    }
}

/// Why the client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ApiClientError {
    /// The configuration's TLS, authentication or headers are unusable.
    #[error(transparent)]
    Config(#[from] kube::Error),
    /// The configured TLS server name is not a valid DNS name or IP address.
    #[error("invalid TLS server name {name:?}: {reason}")]
    TlsServerName {
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
    /// A proxy is configured; this client connects directly only.
    #[error("proxies are not supported (proxy-url {0})")]
    Proxy(String),
}

/// A kube client for `config` over HTTP/2 where the server offers it; the connections it opens
/// are counted in `connections`.
pub fn client(
    config: &kube::Config,
    options: &ApiClientOptions,
    connections: ConnectionCount,
) -> Result<kube::Client, ApiClientError> {
    if let Some(proxy) = &config.proxy_url {
        return Err(ApiClientError::Proxy(proxy.to_string()));
    }
    let mut tcp = HttpConnector::new();
    // https:// URLs go through here too; TLS is added on top.
    tcp.enforce_http(false);
    // Many streams share a connection: their small frames go out at once rather than wait
    // for the previous segment's ACK (Go, and so client-go and the API server, do the same).
    tcp.set_nodelay(true);
    let tcp = CountingConnector::new(tcp, connections);
    let mut tls = HttpsConnectorBuilder::new()
        .with_tls_config(config.rustls_client_config()?)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let server_name =
            name.clone()
                .try_into()
                .map_err(|error: rustls_pki_types::InvalidDnsNameError| {
                    ApiClientError::TlsServerName {
                        name: name.clone(),
                        reason: error.to_string(),
                    }
                })?;
        tls = tls.with_server_name_resolver(FixedServerNameResolver::new(server_name));
    }
    let tls = tls.enable_all_versions().wrap_connector(tcp);
    let mut connector = TimeoutConnector::new(tls);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);

    let mut builder = hyper_util::client::legacy::Client::builder(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .http2_keep_alive_interval(options.keep_alive_interval)
        .http2_keep_alive_timeout(options.keep_alive_timeout)
        .http2_only(options.http2_prior_knowledge && is_plain_http(config));
    let lanes = Lanes::new(builder, connector, options.max_streams_per_connection);

    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        // Under kube's retry layer too (off for nmo), so that a retry would see the wait.
        .layer(RetryAfterLayer)
        // Under the rewrite, which makes a throttled answer look like any JSON refusal.
        .layer(FlowHoldLayer::new(FlowHold::default()))
        // Under the hold: a held call waits without taking a place.
        .layer(CallLimitLayer::new(options.max_calls_in_flight))
        .service(lanes);
    Ok(ClientBuilder::new(service, config.default_namespace.clone()).build())
}

fn is_plain_http(config: &kube::Config) -> bool {
    config.cluster_url.scheme() == Some(&http::uri::Scheme::HTTP)
}
