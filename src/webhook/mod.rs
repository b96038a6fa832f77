//! The validating admission webhook for NodeMaintenances, wire compatible with the Go
//! operator's: same path, same AdmissionReview version, same rules and messages (see
//! `rules`), served over HTTPS with a certificate reloaded from disk when it rotates.
//!
//! `serve` is all `nmo run` needs; `Webhook::bind` + `Webhook::run` let tests bind port 0
//! and learn the address first.

mod caches;
mod error;
mod lookups;
pub mod metrics;
mod review;
pub mod rules;
mod server;
pub mod tls;
mod validate;

use std::future::Future;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use kube::Client;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tracing::info;

use crate::serving;

use caches::Caches;
pub use error::WebhookError;
use lookups::Lookups;
pub use metrics::WebhookMetrics;
pub use server::VALIDATE_PATH;
pub use tls::{DEFAULT_CERT_DIR, SharedCert, TlsError};

/// The Go operator's webhook port (controller-runtime's default).
pub const DEFAULT_PORT: u16 = 9443;

/// How to run the webhook; `nmo run` fills it from `--webhook-port`, `--webhook-cert-dir` and
/// `--enable-http2`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// TCP port on all interfaces; 0 disables the webhook.
    pub port: u16,
    /// Directory holding `apiserver.crt`/`apiserver.key` (OLM) or `tls.crt`/`tls.key`
    /// (cert-manager); OLM's default falls back to controller-runtime's (`tls::cert_dirs`).
    pub cert_dir: PathBuf,
    /// Offer HTTP/2 (ALPN `h2`); off by default, as in the Go operator.
    pub enable_http2: bool,
    /// A certificate held in memory (nmo manages its own, `serving_cert`): served instead of
    /// the files of `cert_dir`.
    pub certificate: Option<SharedCert>,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            port: DEFAULT_PORT,
            cert_dir: PathBuf::from(DEFAULT_CERT_DIR),
            enable_http2: false,
            certificate: None,
        }
    }
}

impl WebhookConfig {
    /// Whether the webhook runs at all (`--webhook-port=0` turns it off).
    pub fn enabled(&self) -> bool {
        self.port != 0
    }
}

/// A webhook with its certificate loaded and its socket bound, not yet serving.
pub struct Webhook {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    lookups: Lookups,
    metrics: WebhookMetrics,
    enable_http2: bool,
}

impl Webhook {
    /// Loads the certificate from `config.cert_dir` and binds `address` (`config.port` is not
    /// used: pass port 0 to let the OS choose, then ask [`Webhook::local_addr`]).
    pub async fn bind(
        config: &WebhookConfig,
        address: SocketAddr,
        client: Client,
    ) -> Result<Self, WebhookError> {
        let tls = tls::server_config(
            &config.cert_dir,
            config.certificate.as_ref(),
            config.enable_http2,
        )?;
        let listener = server::bind(address).await?;
        // The caches list while the rest of nmo starts.
        let caches = Caches::start(&client);
        Ok(Self {
            listener,
            acceptor: TlsAcceptor::from(Arc::new(tls)),
            lookups: Lookups { client, caches },
            metrics: WebhookMetrics::default(),
            enable_http2: config.enable_http2,
        })
    }

    /// Counts and times requests in `metrics` (registered by the caller).
    #[must_use]
    pub fn with_metrics(mut self, metrics: WebhookMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> Result<SocketAddr, WebhookError> {
        self.listener.local_addr().map_err(WebhookError::LocalAddr)
    }

    /// Serves until `shutdown` completes.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), WebhookError> {
        info!(address = ?self.listener.local_addr().ok(), http2 = self.enable_http2, "webhook serving");
        serving::serve(
            self.listener,
            Some(self.acceptor),
            server::router(self.lookups, self.metrics),
            server::limits(self.enable_http2),
            shutdown,
        )
        .await;
        info!("webhook stopped");
        Ok(())
    }
}

/// Loads the certificate and binds `config.port` on all interfaces (IPv6 and IPv4 where the
/// host has IPv6, else IPv4); None when the webhook is disabled (port 0). Fails at once on a
/// missing certificate (naming the paths looked for) or a port in use, so that a process can
/// refuse to start rather than run without its webhook.
pub async fn bind_port(
    config: &WebhookConfig,
    client: Client,
) -> Result<Option<Webhook>, WebhookError> {
    if !config.enabled() {
        info!("webhook disabled (--webhook-port=0)");
        return Ok(None);
    }
    // The certificate is loaded before binding, so its error (not a bind error) is reported.
    let dual_stack = SocketAddr::from((Ipv6Addr::UNSPECIFIED, config.port));
    let webhook = match Webhook::bind(config, dual_stack, client.clone()).await {
        Err(WebhookError::Bind { .. }) => {
            let ipv4 = SocketAddr::from((Ipv4Addr::UNSPECIFIED, config.port));
            Webhook::bind(config, ipv4, client).await?
        }
        other => other?,
    };
    Ok(Some(webhook))
}

/// Runs the webhook on `config.port` until `shutdown` completes (see [`bind_port`]). Disabled,
/// it just waits for `shutdown`, so that a caller selecting over its tasks does not mistake it
/// for a stopped server.
pub async fn serve(
    config: WebhookConfig,
    client: Client,
    shutdown: impl Future<Output = ()>,
) -> Result<(), WebhookError> {
    match bind_port(&config, client).await? {
        Some(webhook) => webhook.run(shutdown).await,
        None => {
            shutdown.await;
            Ok(())
        }
    }
}
