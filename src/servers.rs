//! The servers step of start-up: metrics, health probes and the admission webhook, on every
//! replica (leader or not: the webhook's Service sends to all of them, and a standby must
//! answer its probes). Bound before anything else starts, so that a port in use or a missing
//! certificate stops nmo at once; stopped last.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use kube::Client;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::coexistence::{CoexistenceStatus, annotate_readyz};
use crate::observability::endpoints;
use crate::observability::health::{Liveness, Readiness};
use crate::observability::http::{self, parse_bind_address};
use crate::observability::metrics_auth::MetricsAuth;
use crate::observability::metrics_tls::{self, MetricsCert, MetricsTlsError};
use crate::observability::registry::Metrics;
use crate::options::OperatorOptions;
use crate::serving::{self, Limits};
use crate::serving_cert::{self, Lifetimes, ServingCertConfig};
use crate::webhook::{self, WebhookConfig, WebhookError};

/// How often a certificate nmo manages is checked for renewal.
const CERT_CHECK_INTERVAL: Duration = Duration::from_secs(60);

/// Why a server could not start, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A server address could not be parsed or bound.
    #[error("cannot serve on {address}: {reason}")]
    Bind {
        /// The address.
        address: String,
        /// Why.
        reason: String,
    },
    /// The metrics server's certificate is missing or unusable.
    #[error(transparent)]
    MetricsTls(#[from] MetricsTlsError),
    /// The admission webhook could not start (its certificate is missing, say) or failed.
    #[error(transparent)]
    Webhook(#[from] WebhookError),
    /// The admission webhook's task ended unexpectedly.
    #[error("the admission webhook stopped: {0}")]
    WebhookStopped(String),
}

/// What the probes report: whether this replica is ready and alive, and whether another
/// operator drives nodes (a detail of `/readyz`). Clones share it; the election and the
/// actors' steps keep it up to date.
#[derive(Debug, Clone, Default)]
pub struct Probes {
    /// `/readyz`.
    pub readiness: Readiness,
    /// `/healthz`.
    pub liveness: Liveness,
    /// The `/readyz` detail while another operator runs.
    pub coexistence: CoexistenceStatus,
}

/// The running servers.
pub struct Servers {
    stop: watch::Sender<bool>,
    webhook: Option<JoinHandle<Result<(), WebhookError>>>,
}

impl Servers {
    /// Binds and starts every server the options ask for: `/metrics` (`--metrics-bind-address`),
    /// `/healthz` and `/readyz` (`--health-probe-bind-address`), the webhook
    /// (`--webhook-port`). On an error nothing is left running.
    pub async fn start(
        options: &OperatorOptions,
        metrics: &Metrics,
        probes: &Probes,
        client: &Client,
    ) -> Result<Servers, ServerError> {
        let (stop, _) = watch::channel(false);
        let mut servers = Servers {
            stop,
            webhook: None,
        };
        let started = servers.start_all(options, metrics, probes, client).await;
        if started.is_err() {
            servers.stop();
        }
        started.map(|()| servers)
    }

    async fn start_all(
        &mut self,
        options: &OperatorOptions,
        metrics: &Metrics,
        probes: &Probes,
        client: &Client,
    ) -> Result<(), ServerError> {
        if let Some(listener) = bind(&options.metrics_bind_address).await? {
            let (router, tls) = metrics_endpoint(options, metrics, client)?;
            tokio::spawn(serving::serve(
                listener,
                tls,
                router,
                Limits::metrics(options.enable_http2),
                self.stopped(),
            ));
        }
        if let Some(listener) = bind(&options.health_probe_bind_address).await? {
            let router = annotate_readyz(
                endpoints::probes_router(probes.readiness.clone(), probes.liveness.clone()),
                probes.coexistence.clone(),
            );
            tokio::spawn(http::serve(
                listener,
                router,
                options.enable_http2,
                self.stopped(),
            ));
        }
        let certificate = serving_certificate(client, options, self.stopped()).await;
        let webhook_config = WebhookConfig {
            port: options.webhook_port,
            cert_dir: options.webhook_cert_dir.clone(),
            enable_http2: options.enable_http2,
            certificate,
        };
        if let Some(bound) = webhook::bind_port(&webhook_config, client.clone()).await? {
            let serving = bound
                .with_metrics(metrics.webhook.clone())
                .run(self.stopped());
            self.webhook = Some(tokio::spawn(serving));
        }
        Ok(())
    }

    /// Completes when the servers are told to stop.
    fn stopped(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut receiver = self.stop.subscribe();
        async move {
            let _ = receiver.wait_for(|stop| *stop).await;
        }
    }

    /// Completes (with why) if a server stops on its own: only the webhook can. Never completes
    /// while they all run; cancel-safe, so it can be selected on again and again.
    pub async fn failed(&mut self) -> ServerError {
        let Some(task) = self.webhook.as_mut() else {
            return std::future::pending().await;
        };
        let ended = task.await;
        self.webhook = None;
        match ended {
            // It returns only once told to stop, and then nobody waits for this any more.
            Ok(Ok(())) => std::future::pending().await,
            Ok(Err(error)) => ServerError::Webhook(error),
            Err(join) => ServerError::WebhookStopped(join.to_string()),
        }
    }

    /// Stops every server (connections in progress are dropped; the webhook drains its
    /// reviews in flight for a few seconds on its own task).
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }
}

/// The webhook's certificate when nmo manages it (`--webhook-cert-secret`): waits for a first
/// one, then keeps it renewed and its CA published in the background until `stopped`.
async fn serving_certificate(
    client: &Client,
    options: &OperatorOptions,
    stopped: impl Future<Output = ()> + Send + 'static,
) -> Option<webhook::SharedCert> {
    if options.webhook_port == 0 || options.webhook_cert_secret.is_empty() {
        return None;
    }
    let config = ServingCertConfig {
        secret: options.webhook_cert_secret.clone(),
        namespace: options.own_namespace(client),
        service: options.webhook_service.clone(),
        webhook_configuration: options.webhook_configuration.clone(),
        lifetimes: Lifetimes::default(),
        check_interval: CERT_CHECK_INTERVAL,
        call_timeout: options.api_call_timeout,
    };
    let shared = serving_cert::obtain(client, &config).await;
    tokio::spawn(serving_cert::keep(
        client.clone(),
        config,
        shared.clone(),
        stopped,
    ));
    Some(shared)
}

/// `/metrics`, behind TLS and the token check with `--metrics-secure`, plain otherwise.
fn metrics_endpoint(
    options: &OperatorOptions,
    metrics: &Metrics,
    client: &Client,
) -> Result<(Router, Option<TlsAcceptor>), ServerError> {
    let router = endpoints::metrics_router(metrics.registry.clone());
    if !options.metrics_secure {
        return Ok((router, None));
    }
    let cert = MetricsCert::from_flags(
        options.metrics_cert_path.as_ref(),
        &options.metrics_cert_name,
        &options.metrics_cert_key,
    );
    let tls = metrics_tls::server_config(&cert, options.enable_http2)?;
    let router = MetricsAuth::new(client.clone()).protect(router);
    Ok((router, Some(TlsAcceptor::from(Arc::new(tls)))))
}

/// The listener for a Go-style bind address; None when it is `0` or empty (disabled).
async fn bind(address: &str) -> Result<Option<TcpListener>, ServerError> {
    if address == "0" || address.is_empty() {
        return Ok(None);
    }
    let error = |reason: String| ServerError::Bind {
        address: address.to_string(),
        reason,
    };
    let addresses = parse_bind_address(address).map_err(|e| error(e.to_string()))?;
    let listener = http::bind_first(&addresses)
        .await
        .map_err(|e| error(e.to_string()))?;
    Ok(Some(listener))
}
