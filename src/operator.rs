//! `nmo run`: the operator process. Serves metrics and probes, optionally waits to be elected
//! leader, then runs the actor system fed by the NodeMaintenance watch until it is told to stop.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use nmo_actors::config::{Config, defaults};
use nmo_actors::fleet::{FleetBudget, Limit, LimitError};
use nmo_actors::ports::Cluster as _;
use nmo_actors::system::{self, ActorSystem, StartError};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::api_client::{self, ApiClientError, ApiClientOptions, ConnectionCount};
use crate::cli::duration::parse_duration;
use crate::cli::go_flags::parse_go_bool;
use crate::cluster::KubeCluster;
use crate::coexistence::{
    self, CoexistenceConfig, CoexistenceStatus, GoOperatorWatch, annotate_readyz,
};
use crate::leader::{Fence, LeaderConfig, LeaderConfigError, LeaderElector, LeaderError};
use crate::maintenance_watch::{self, WatchError};
use crate::observability::api_metrics;
use crate::observability::endpoints;
use crate::observability::health::{self, HealthMetrics, Liveness, Readiness};
use crate::observability::http::{self, parse_bind_address};
use crate::observability::operator_metrics::{OperatorMetrics, ProcessObserver};
use crate::observability::registry::Metrics;
use crate::serving_cert::{self, Lifetimes, ServingCertConfig};
use crate::stopping;
use crate::webhook::{self, WebhookConfig, WebhookError};

/// The operator's flags (the Go operator's names where it has them).
#[derive(Debug, Clone, clap::Args)]
pub struct OperatorOptions {
    /// Where to serve Prometheus metrics (`:8080` = every interface); `0` disables it.
    #[arg(long, default_value = ":8080")]
    pub metrics_bind_address: String,
    /// Where to serve `/healthz` and `/readyz`; `0` disables it.
    #[arg(long, default_value = ":8081")]
    pub health_probe_bind_address: String,
    /// Run only while holding the leader election lease `135b1886.medik8s.io`
    /// (`--leader-elect`, `--leader-elect=true|false`).
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false",
          default_missing_value = "true", value_parser = parse_go_bool, value_name = "BOOL")]
    pub leader_elect: bool,
    /// How long a leader election lease is valid after its last renewal.
    #[arg(long, value_parser = parse_duration, default_value = "15s")]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader keeps trying to renew before it stops leading.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub leader_elect_renew_deadline: Duration,
    /// How often replicas try to acquire or renew the leader election lease.
    #[arg(long, value_parser = parse_duration, default_value = "2s")]
    pub leader_elect_retry_period: Duration,
    /// Allow HTTP/2 on nmo's servers (off: HTTP/1.1 only; `--enable-http2=true|false`).
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false",
          default_missing_value = "true", value_parser = parse_go_bool, value_name = "BOOL")]
    pub enable_http2: bool,
    /// Speak HTTP/2 without TLS (h2c) to an `http://` API server such as `nmo sim`. An `https://`
    /// API server is asked for HTTP/2 anyway (ALPN), as a real one offers it.
    #[arg(long, env = "NMO_KUBE_API_HTTP2_PRIOR_KNOWLEDGE", num_args = 0..=1,
          require_equals = true, default_value = "false", default_missing_value = "true",
          value_parser = parse_go_bool, value_name = "BOOL")]
    pub kube_api_http2_prior_knowledge: bool,
    /// Namespace of the node leases shared with the other medik8s operators.
    #[arg(long, env = "LEASE_NAMESPACE", default_value = defaults::LEASE_NAMESPACE)]
    pub lease_namespace: String,
    /// Cluster-wide evictions per second.
    #[arg(long, default_value_t = defaults::EVICTION_RATE_PER_SEC)]
    pub eviction_rate: f64,
    /// Evictions allowed in a burst above the rate.
    #[arg(long, default_value_t = defaults::EVICTION_BURST)]
    pub eviction_burst: u32,
    /// Evictions in flight at once, cluster wide.
    #[arg(long, default_value_t = defaults::EVICTION_MAX_IN_FLIGHT)]
    pub max_evictions_in_flight: usize,
    /// How often each node lease is renewed (default: a third of its 3600 s duration).
    #[arg(long, value_parser = parse_duration)]
    pub lease_renew_interval: Option<Duration>,
    /// How long one API call may take before it counts as failed and is retried (a hung
    /// connection never freezes a maintenance).
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub api_call_timeout: Duration,
    /// Port of the validating admission webhook (HTTPS); 0 disables it.
    #[arg(long, default_value_t = webhook::DEFAULT_PORT)]
    pub webhook_port: u16,
    /// Directory with the webhook's serving certificate (`apiserver.crt`/`apiserver.key`, or
    /// `tls.crt`/`tls.key`); reloaded when the files change. By default OLM's location, then
    /// controller-runtime's (`$TMPDIR/k8s-webhook-server/serving-certs`) when that is absent.
    #[arg(long, default_value = webhook::DEFAULT_CERT_DIR)]
    pub webhook_cert_dir: PathBuf,
    /// Manage the webhook's serving certificate in this Secret of nmo's namespace (a CA and a
    /// certificate for `--webhook-service`, renewed before they expire, the CA published in
    /// `--webhook-configuration`) instead of reading `--webhook-cert-dir`. Empty: read the
    /// directory (cert-manager, OLM).
    #[arg(long, env = "NMO_WEBHOOK_CERT_SECRET", default_value = "")]
    pub webhook_cert_secret: String,
    /// The webhook's Service (its DNS names go into a certificate nmo manages).
    #[arg(long, default_value = "nmo-webhook")]
    pub webhook_service: String,
    /// The ValidatingWebhookConfiguration that gets the CA of a certificate nmo manages.
    #[arg(long, default_value = "nmo-validating-webhook")]
    pub webhook_configuration: String,
    /// nmo's namespace (the downward API's metadata.namespace); unset: the client's default
    /// namespace (a pod's service account namespace).
    #[arg(long, env = "POD_NAMESPACE")]
    pub pod_namespace: Option<String>,
    /// This replica's pod name (default: HOSTNAME, which a pod's is): the start of its leader
    /// election identity and the instance its events are reported by.
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,
    /// At most this many NodeMaintenances drive nodes at once: a number, or a percentage of
    /// the nodes (`10%`). The others wait, oldest first, touching nothing. Unset: no limit.
    #[arg(long, value_name = "N|P%")]
    pub max_parallel_maintenances: Option<String>,
    /// NodeMaintenances start only while at most this many nodes are NotReady or cordoned (by
    /// anyone): a number, or a percentage of the nodes (`10%`). Unset: no limit.
    #[arg(long, value_name = "N|P%")]
    pub max_unavailable_nodes: Option<String>,
    /// How long a stopping nmo waits for the maintenances being deleted to give their nodes
    /// back before its actors stop (keep it under the pod's terminationGracePeriodSeconds).
    #[arg(long, value_parser = parse_duration, default_value = "20s")]
    pub graceful_shutdown_timeout: Duration,
    /// How long the node leases stay valid after nmo stops (a successor renews them as it
    /// resumes each maintenance; without one they lapse then instead of after an hour).
    #[arg(long, value_parser = parse_duration, default_value = "5m")]
    pub lease_duration_on_stop: Duration,
    /// How often to look for the Go operator (its leader election lease `135b1886.medik8s.io`
    /// renewed in another namespace); while it runs, nmo drives no node. `0`: never look.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub go_operator_check_interval: Duration,
}

impl Default for OperatorOptions {
    fn default() -> Self {
        OperatorOptions {
            metrics_bind_address: ":8080".into(),
            health_probe_bind_address: ":8081".into(),
            leader_elect: false,
            leader_elect_lease_duration: Duration::from_secs(15),
            leader_elect_renew_deadline: Duration::from_secs(10),
            leader_elect_retry_period: Duration::from_secs(2),
            enable_http2: false,
            kube_api_http2_prior_knowledge: false,
            lease_namespace: defaults::LEASE_NAMESPACE.into(),
            eviction_rate: defaults::EVICTION_RATE_PER_SEC,
            eviction_burst: defaults::EVICTION_BURST,
            max_evictions_in_flight: defaults::EVICTION_MAX_IN_FLIGHT,
            lease_renew_interval: None,
            api_call_timeout: defaults::CALL_TIMEOUT,
            // Embedded operators (tests, the demo) have no serving certificate.
            webhook_port: 0,
            webhook_cert_dir: PathBuf::from(webhook::DEFAULT_CERT_DIR),
            webhook_cert_secret: String::new(),
            webhook_service: "nmo-webhook".into(),
            webhook_configuration: "nmo-validating-webhook".into(),
            pod_namespace: None,
            pod_name: None,
            max_parallel_maintenances: None,
            max_unavailable_nodes: None,
            graceful_shutdown_timeout: Duration::from_secs(20),
            lease_duration_on_stop: Duration::from_secs(300),
            // Embedded operators (tests, the demo) have the cluster to themselves.
            go_operator_check_interval: Duration::ZERO,
        }
    }
}

/// A flag value nmo refuses to start with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OptionsError {
    /// The node lease would never be renewed in time (or the renewal timer could not run).
    #[error(
        "--lease-renew-interval ({interval:?}) must be greater than zero and shorter than the node lease's duration ({duration:?})"
    )]
    LeaseRenewInterval {
        /// The interval asked for.
        interval: Duration,
        /// The node lease's duration.
        duration: Duration,
    },
    /// Evictions could never be sent.
    #[error("--eviction-rate ({0}) must be a number of evictions per second greater than zero")]
    EvictionRate(f64),
    /// Evictions could never be sent.
    #[error("--eviction-burst must be at least 1")]
    EvictionBurst,
    /// Evictions could never be sent.
    #[error("--max-evictions-in-flight must be at least 1")]
    MaxEvictionsInFlight,
    /// No namespace to keep the node leases in.
    #[error("LEASE_NAMESPACE (--lease-namespace) must not be empty")]
    LeaseNamespace,
    /// Every API call would fail at once.
    #[error("--api-call-timeout must be greater than zero")]
    ApiCallTimeout,
    /// A lease that lapses at once, or outlives the node lease's own duration.
    #[error(
        "--lease-duration-on-stop ({0:?}) must be at least a second and at most the node lease's duration (1h)"
    )]
    LeaseDurationOnStop(Duration),
    /// The leader election timings could let two replicas lead at once.
    #[error(transparent)]
    Leader(#[from] LeaderConfigError),
    /// The cluster maintenance budget's parallel limit is zero or malformed.
    #[error("--max-parallel-maintenances: {0}")]
    MaxParallelMaintenances(#[source] LimitError),
    /// The cluster maintenance budget's unavailable limit is zero or malformed.
    #[error("--max-unavailable-nodes: {0}")]
    MaxUnavailableNodes(#[source] LimitError),
}

impl OperatorOptions {
    /// Refuses values that would make nmo misbehave later instead of failing now: a renewal
    /// timer of zero (it would panic, and the lease would silently never be renewed), a
    /// renewal slower than the lease lapses, evictions that can never be sent, leader timings
    /// that allow two leaders.
    pub fn validate(&self) -> Result<(), OptionsError> {
        let actors = self.actor_config();
        if actors.lease_renew_interval.is_zero()
            || actors.lease_renew_interval >= actors.lease_duration
        {
            return Err(OptionsError::LeaseRenewInterval {
                interval: actors.lease_renew_interval,
                duration: actors.lease_duration,
            });
        }
        if !(self.eviction_rate.is_finite() && self.eviction_rate > 0.0) {
            return Err(OptionsError::EvictionRate(self.eviction_rate));
        }
        if self.eviction_burst == 0 {
            return Err(OptionsError::EvictionBurst);
        }
        if self.max_evictions_in_flight == 0 {
            return Err(OptionsError::MaxEvictionsInFlight);
        }
        if self.lease_namespace.trim().is_empty() {
            return Err(OptionsError::LeaseNamespace);
        }
        if self.api_call_timeout.is_zero() {
            return Err(OptionsError::ApiCallTimeout);
        }
        if self.lease_duration_on_stop.as_secs() == 0
            || self.lease_duration_on_stop > defaults::LEASE_DURATION
        {
            return Err(OptionsError::LeaseDurationOnStop(
                self.lease_duration_on_stop,
            ));
        }
        if self.leader_elect {
            self.leader_config(String::new()).validate()?;
        }
        self.fleet_budget()?;
        Ok(())
    }

    /// The cluster maintenance budget of these options; a zero or malformed limit is refused
    /// (it would silently stop every maintenance, or mean something else than meant).
    pub fn fleet_budget(&self) -> Result<FleetBudget, OptionsError> {
        let parse = |text: &Option<String>| text.as_deref().map(str::parse::<Limit>).transpose();
        Ok(FleetBudget {
            max_parallel: parse(&self.max_parallel_maintenances)
                .map_err(OptionsError::MaxParallelMaintenances)?,
            max_unavailable: parse(&self.max_unavailable_nodes)
                .map_err(OptionsError::MaxUnavailableNodes)?,
        })
    }

    /// The look-out for another operator driving nodes (`coexistence`), if it is on: started
    /// once this replica leads; the election's namespace, whose lease is nmo's own, is left
    /// out.
    pub fn go_operator_watch(
        &self,
        client: &Client,
        status: CoexistenceStatus,
    ) -> Option<GoOperatorWatch> {
        if self.go_operator_check_interval.is_zero() {
            return None;
        }
        let config = CoexistenceConfig {
            own_election_namespace: self
                .leader_elect
                .then(|| client.default_namespace().to_string()),
            interval: self.go_operator_check_interval,
            call_timeout: self.api_call_timeout,
            instance: self.pod_name(),
        };
        Some(GoOperatorWatch::start(client.clone(), config, status))
    }

    /// The leader election settings of these options, for a lease in `namespace`.
    pub fn leader_config(&self, namespace: String) -> LeaderConfig {
        LeaderConfig {
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
            ..LeaderConfig::new(namespace, leader_identity(self.pod_name()))
        }
    }

    /// nmo's namespace: `--pod-namespace` (POD_NAMESPACE, the downward API), else the client's
    /// default namespace (the service account's, in a pod).
    pub fn own_namespace(&self, client: &Client) -> String {
        self.pod_namespace
            .clone()
            .filter(|ns| !ns.trim().is_empty())
            .unwrap_or_else(|| client.default_namespace().to_string())
    }

    /// This replica's pod name: `--pod-name`, else HOSTNAME.
    pub fn pod_name(&self) -> Option<String> {
        self.pod_name
            .clone()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .filter(|name| !name.trim().is_empty())
    }

    /// The actor system's configuration for these options.
    pub fn actor_config(&self) -> Config {
        let mut config = Config {
            lease_namespace: self.lease_namespace.clone(),
            eviction_rate_per_sec: self.eviction_rate,
            eviction_burst: self.eviction_burst,
            eviction_max_in_flight: self.max_evictions_in_flight,
            call_timeout: self.api_call_timeout,
            // Unnamed actors: several operators can share a process (tests, the demo).
            actor_name_prefix: None,
            ..Config::default()
        };
        if let Some(interval) = self.lease_renew_interval {
            config.lease_renew_interval = interval;
        }
        // `run` validates first, so an invalid budget never gets here.
        config.fleet = self.fleet_budget().unwrap_or_default();
        config
    }
}

/// How long connecting to the API server may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the client waits for any answer (a response, or the next bytes of a watch) before
/// it gives the connection up: a backstop for calls nothing else bounds (the listings inside
/// kube-runtime's watchers). Longer than a watch may stay silent (the server ends a watch
/// after 290 s, and kube-runtime's watcher has its own idle timeout 5 s later), so it never
/// breaks a healthy watch; every call of the actors, of the leader election and of the
/// webhook has a much shorter deadline of its own.
pub const READ_TIMEOUT: Duration = Duration::from_secs(300);

/// The configuration nmo's kube client runs with. kube's built-in retry is off: it resends a
/// 429 up to 15 times with growing waits, so a refusal by a PodDisruptionBudget would hang
/// inside one call for minutes, holding an eviction slot, and the eviction actor's own
/// per-budget backoff (which decides when to ask again) would never start. Connect and read
/// timeouts are set (see [`CONNECT_TIMEOUT`], [`READ_TIMEOUT`]); the read timeout counts from
/// each request sent, not from when its pooled connection went idle.
pub fn client_config(mut config: kube::Config) -> kube::Config {
    config.default_retry = false;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    config.reset_reader_on_write = true;
    config
}

/// The kube client nmo runs with (see [`client_config`]): requests and watches share a few
/// HTTP/2 connections when the server offers HTTP/2 (`api_client`).
pub fn client(
    config: kube::Config,
    options: &OperatorOptions,
) -> Result<OperatorClient, OperatorError> {
    let config = client_config(config);
    let client_options = ApiClientOptions {
        http2_prior_knowledge: options.kube_api_http2_prior_knowledge,
        ..ApiClientOptions::default()
    };
    let connections = ConnectionCount::default();
    let client = api_client::client(&config, &client_options, connections.clone())?;
    Ok(OperatorClient {
        client,
        connections: Some(connections),
    })
}

/// The client the operator runs with, and the count of its connections when it was built by
/// [`client`] (a client built elsewhere, by a test say, has none to report).
pub struct OperatorClient {
    /// The client.
    pub client: Client,
    /// Its connections, reported as `nmo_kube_api_connections_*`.
    pub connections: Option<ConnectionCount>,
}

impl From<Client> for OperatorClient {
    fn from(client: Client) -> Self {
        OperatorClient {
            client,
            connections: None,
        }
    }
}

/// Why the operator stopped other than being asked to.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// A server address could not be parsed or bound.
    #[error("cannot serve on {address}: {reason}")]
    Bind {
        /// The address.
        address: String,
        /// Why.
        reason: String,
    },
    /// The actor system did not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// Leader election failed or leadership was lost.
    #[error(transparent)]
    Leader(#[from] LeaderError),
    /// A flag has a value nmo refuses to run with.
    #[error("invalid flags: {0}")]
    Options(#[from] OptionsError),
    /// The kube client could not be built from the cluster configuration.
    #[error("cannot build the Kubernetes API client: {0}")]
    Client(#[from] ApiClientError),
    /// The NodeMaintenance watch stopped.
    #[error(transparent)]
    MaintenanceWatch(#[from] WatchError),
    /// The supervisor actor stopped (it never does while nmo runs).
    #[error("the supervisor stopped")]
    SupervisorStopped,
    /// The admission webhook could not start (its certificate is missing, say).
    #[error(transparent)]
    Webhook(#[from] WebhookError),
    /// nmo's service account may not do what nmo needs (checked at start).
    #[error(transparent)]
    Rights(#[from] crate::rbac_check::MissingRights),
    /// The admission webhook's task ended unexpectedly.
    #[error("the admission webhook stopped: {0}")]
    WebhookStopped(String),
}

async fn bind(address: &str) -> Result<Option<TcpListener>, OperatorError> {
    if address == "0" || address.is_empty() {
        return Ok(None);
    }
    let error = |reason: String| OperatorError::Bind {
        address: address.to_string(),
        reason,
    };
    let addresses = parse_bind_address(address).map_err(|e| error(e.to_string()))?;
    let listener = http::bind_first(&addresses)
        .await
        .map_err(|e| error(e.to_string()))?;
    Ok(Some(listener))
}

/// Runs the operator against `client` until `shutdown` completes (then it stops the actors,
/// leaving every node as it is for the next leader) or until it fails.
pub async fn run(
    client: impl Into<OperatorClient>,
    options: OperatorOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), OperatorError> {
    let OperatorClient {
        client,
        connections,
    } = client.into();
    options.validate()?;
    let leader_config = options.leader_config(client.default_namespace().to_string());
    let leader_namespace = options
        .leader_elect
        .then_some(leader_config.namespace.as_str());
    let needs = crate::rbac_check::needs(&options.lease_namespace, leader_namespace);
    crate::rbac_check::check(&client, &needs, options.api_call_timeout).await?;
    let readiness = Readiness::default();
    let liveness = Liveness::default();
    let coexistence_status = CoexistenceStatus::default();
    let Metrics {
        registry,
        maintenances: maintenance_metrics,
        api_requests,
        leadership: leader_metric,
        webhook: webhook_metrics,
        health: health_metrics,
    } = Metrics::new(connections);
    let registry = Arc::new(registry);
    // Every request nmo makes (watches, election, events) is counted.
    let client = api_metrics::count_requests(client, api_requests);
    tokio::pin!(shutdown);
    let (stop_servers, servers_stopped) = watch::channel(false);
    let stopped = move || {
        let mut receiver = servers_stopped.clone();
        async move {
            let _ = receiver.wait_for(|stop| *stop).await;
        }
    };
    if let Some(listener) = bind(&options.metrics_bind_address).await? {
        let router = endpoints::metrics_router(registry.clone());
        tokio::spawn(http::serve(
            listener,
            router,
            options.enable_http2,
            stopped(),
        ));
    }
    if let Some(listener) = bind(&options.health_probe_bind_address).await? {
        let router = annotate_readyz(
            endpoints::probes_router(readiness.clone(), liveness.clone()),
            coexistence_status.clone(),
        );
        tokio::spawn(http::serve(
            listener,
            router,
            options.enable_http2,
            stopped(),
        ));
    }

    // The webhook runs on every replica, leader or not: its Service sends to all of them.
    let certificate = tokio::select! {
        () = &mut shutdown => {
            let _ = stop_servers.send(true);
            return Ok(());
        }
        certificate = serving_certificate(&client, &options, stopped()) => certificate,
    };
    let webhook_config = WebhookConfig {
        port: options.webhook_port,
        cert_dir: options.webhook_cert_dir.clone(),
        enable_http2: options.enable_http2,
        certificate,
    };
    // Bound before anything else starts: without its certificate nmo refuses to start.
    let webhook_task = match webhook::bind_port(&webhook_config, client.clone()).await {
        Ok(Some(bound)) => Some(tokio::spawn(
            bound.with_metrics(webhook_metrics).run(stopped()),
        )),
        Ok(None) => None,
        Err(error) => {
            let _ = stop_servers.send(true);
            return Err(error.into());
        }
    };
    let webhook_failed = async move {
        match webhook_task {
            Some(task) => match task.await {
                Ok(Ok(())) => std::future::pending().await,
                Ok(Err(error)) => OperatorError::from(error),
                Err(join) => OperatorError::WebhookStopped(join.to_string()),
            },
            None => std::future::pending().await,
        }
    };
    tokio::pin!(webhook_failed);

    let elector = if options.leader_elect {
        let elector = LeaderElector::new(client.clone(), leader_config);
        // A standby is ready: it serves probes and waits; only the leader watches.
        readiness.standing_by();
        tokio::select! {
            () = &mut shutdown => {
                let _ = stop_servers.send(true);
                return Ok(());
            }
            acquired = elector.acquire() => acquired?,
            error = &mut webhook_failed => {
                let _ = stop_servers.send(true);
                return Err(error);
            }
        }
        Some(elector)
    } else {
        None
    };

    // Writes go out only while this replica leads (always, without election).
    let fence = elector
        .as_ref()
        .map_or_else(Fence::open, LeaderElector::fence);
    let mut others = options.go_operator_watch(&client, coexistence_status);
    let health = Health {
        readiness: readiness.clone(),
        liveness,
        metrics: health_metrics,
    };
    let leadership = async {
        match &elector {
            Some(elector) => elector.hold().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(leadership);
    // Drive nodes while no other operator does; stop the actors while one does, as on a
    // handover, and start them again from the cluster once it is gone (`coexistence`).
    let mut driving = None;
    let mut outcome = loop {
        if let Some(others) = others.as_mut() {
            tokio::select! {
                () = &mut shutdown => break Ok(()),
                lost = &mut leadership => break Err(OperatorError::from(lost)),
                error = &mut webhook_failed => break Err(error),
                // Paused, a replica is ready as a standby is: its webhook still serves.
                () = others.alone(|| readiness.standing_by()) => {}
            }
        }
        let mut started =
            Driving::start(&client, &options, &fence, &maintenance_metrics, &health).await?;
        leader_metric.leading();
        let ended = tokio::select! {
            () = &mut shutdown => Some(Ok(())),
            error = started.failed() => Some(Err(error)),
            lost = &mut leadership => Some(Err(OperatorError::from(lost))),
            error = &mut webhook_failed => Some(Err(error)),
            _ = other_runs(&mut others) => None,
        };
        if let Some(outcome) = ended {
            driving = Some(started);
            break outcome;
        }
        tracing::info!("stopping the actors while another operator drives nodes");
        leader_metric.standing_by();
        started.stop().await;
    };
    if outcome.is_ok()
        && let Some(driving) = driving.as_mut()
    {
        // Told to stop: the undos under way finish first, leading and watching as before.
        outcome = tokio::select! {
            () = stopping::let_undos_finish(
                &client,
                options.graceful_shutdown_timeout,
                options.api_call_timeout,
            ) => Ok(()),
            error = driving.failed() => Err(error),
            lost = &mut leadership => Err(OperatorError::from(lost)),
        };
    }
    leader_metric.standing_by();
    // Nothing may be written from now on; the actors' in-flight calls are aborted and awaited
    // before the leader lease is released (a successor acts only after that).
    fence.close();
    if let Some(driving) = driving {
        driving.stop().await;
        // Paused, the leases are the other operator's to keep.
        if outcome.is_ok() {
            shorten_node_leases(&client, &options).await;
        }
    }
    if let Some(elector) = &elector
        && outcome.is_ok()
        && let Err(error) = elector.release().await
    {
        tracing::warn!(%error, "could not release the leader lease; a standby takes over when it expires");
    }
    let _ = stop_servers.send(true);
    outcome
}

/// Completes when another operator is seen running; never without the check.
async fn other_runs(others: &mut Option<GoOperatorWatch>) -> Vec<coexistence::Sighting> {
    match others {
        Some(others) => others.other_runs().await,
        None => std::future::pending().await,
    }
}

/// The probes' state, and the metric that reports it, shared by every [`Driving`].
struct Health {
    readiness: Readiness,
    liveness: Liveness,
    metrics: HealthMetrics,
}

/// The actors, the NodeMaintenance watch that feeds them and the probes that follow both,
/// while this replica drives nodes.
struct Driving {
    actors: ActorSystem,
    watch: tokio::task::JoinHandle<WatchError>,
    /// Completes when the supervisor stops answering for good (`/healthz` says so).
    supervised: tokio::task::JoinHandle<()>,
    health_report: tokio::task::JoinHandle<()>,
}

impl Driving {
    /// Starts the actors behind `fence`, the watch that feeds them (readiness follows its
    /// watches) and the supervisor's heartbeat.
    async fn start(
        client: &Client,
        options: &OperatorOptions,
        fence: &Fence,
        metrics: &OperatorMetrics,
        health: &Health,
    ) -> Result<Driving, StartError> {
        let cluster = Arc::new(
            KubeCluster::new(client.clone(), options.pod_name())
                .with_fence(fence.clone())
                .with_call_timeout(options.api_call_timeout),
        );
        let initial_lists = cluster.initial_lists();
        let watches = cluster.watch_health();
        health.readiness.leading(watches.clone());
        let mut config = options.actor_config();
        ensure_lease_namespace(cluster.as_ref(), &config).await;
        config.observer = ProcessObserver::new(metrics.clone()).shared();
        let actors = system::start(cluster, config).await?;
        let watch = tokio::spawn(maintenance_watch::run(
            client.clone(),
            initial_lists,
            watches.clone(),
            actors.supervisor.clone(),
            health.readiness.clone(),
        ));
        let liveness = health.liveness.clone();
        let supervisor = actors.supervisor.clone();
        let supervised = tokio::spawn(async move { liveness.watch_supervisor(supervisor).await });
        let health_report = tokio::spawn(health::report(
            health.readiness.clone(),
            health.liveness.clone(),
            watches,
            health.metrics.clone(),
        ));
        Ok(Driving {
            actors,
            watch,
            supervised,
            health_report,
        })
    }

    /// Completes if the NodeMaintenance watch stops feeding the actors, or the supervisor
    /// stops. Cancel-safe.
    async fn failed(&mut self) -> OperatorError {
        tokio::select! {
            joined = &mut self.watch => OperatorError::from(match joined {
                Ok(error) => error,
                Err(join) => WatchError::SupervisorGone(format!("the watch task ended: {join}")),
            }),
            _ = &mut self.supervised => OperatorError::SupervisorStopped,
        }
    }

    /// Stops the watch and the probes' followers, then the actors, aborting and awaiting their
    /// calls in flight.
    async fn stop(self) {
        tracing::info!("stopping the actors");
        self.watch.abort();
        self.supervised.abort();
        self.health_report.abort();
        self.actors.shutdown().await;
    }
}

/// The node leases a stopping leader leaves behind lapse after `--lease-duration-on-stop`
/// unless a successor renews them (`stopping`); a failure only costs that they last longer.
async fn shorten_node_leases(client: &Client, options: &OperatorOptions) {
    if let Err(error) = stopping::shorten_node_leases(
        client,
        &options.lease_namespace,
        options.lease_duration_on_stop,
        options.api_call_timeout,
    )
    .await
    {
        tracing::warn!(%error, "cannot shorten the node leases; they lapse an hour after their last renewal");
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
        check_interval: Duration::from_secs(60),
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

/// Makes sure the node leases' namespace exists before any maintenance runs (one read when it
/// does): otherwise the first maintenances, started together, would each find it missing on
/// creating their lease and each create it (three requests more per maintenance). Best effort:
/// a maintenance still creates the namespace itself when it is missing.
async fn ensure_lease_namespace(cluster: &KubeCluster, config: &Config) {
    let ensured = tokio::time::timeout(
        config.call_timeout,
        cluster.ensure_namespace(&config.lease_namespace),
    )
    .await;
    let error = match ensured {
        Ok(Ok(())) => return,
        Ok(Err(error)) => error.to_string(),
        Err(_) => format!("no answer within {:?}", config.call_timeout),
    };
    tracing::warn!(
        namespace = %config.lease_namespace,
        %error,
        "cannot make sure the lease namespace exists; the first maintenance will"
    );
}

/// This replica's identity in the election: the pod name plus a random suffix, so a restarted
/// pod with the same name does not inherit its predecessor's leadership.
fn leader_identity(pod_name: Option<String>) -> String {
    let pod = pod_name.unwrap_or_else(|| "nmo".to_string());
    format!("{pod}_{:016x}", rand::random::<u64>())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client whose every request fails: the checks below must refuse before any call.
    fn unreachable_client() -> Client {
        let service = tower::service_fn(|_request: ::http::Request<kube::client::Body>| async {
            Err::<::http::Response<kube::client::Body>, _>(std::io::Error::other("no API server"))
        });
        Client::new(service, "nmo")
    }

    #[tokio::test]
    async fn leader_timings_that_allow_two_leaders_refuse_to_start() {
        let options = OperatorOptions {
            leader_elect: true,
            leader_elect_lease_duration: Duration::from_secs(10),
            leader_elect_renew_deadline: Duration::from_secs(10),
            metrics_bind_address: "0".into(),
            health_probe_bind_address: "0".into(),
            ..OperatorOptions::default()
        };
        let outcome = run(unreachable_client(), options, std::future::pending()).await;
        let Err(error) = outcome else {
            panic!("started with renew deadline = lease duration");
        };
        assert!(
            matches!(error, OperatorError::Options(OptionsError::Leader(_))),
            "{error}"
        );
        assert!(error.to_string().contains("--leader-elect-renew-deadline"));
    }

    #[tokio::test]
    async fn a_node_lease_renewal_of_zero_or_slower_than_the_lease_refuses_to_start() {
        for seconds in [0, 3600, 7200] {
            let options = OperatorOptions {
                lease_renew_interval: Some(Duration::from_secs(seconds)),
                ..OperatorOptions::default()
            };
            let outcome = run(unreachable_client(), options, std::future::pending()).await;
            let Err(error) = outcome else {
                panic!("started with --lease-renew-interval {seconds}");
            };
            assert!(
                matches!(
                    error,
                    OperatorError::Options(OptionsError::LeaseRenewInterval { .. })
                ),
                "{seconds}: {error}"
            );
            assert!(error.to_string().contains("--lease-renew-interval"));
        }
    }

    #[test]
    fn the_client_has_connect_and_read_timeouts_that_spare_long_watches() {
        let config = client_config(kube::Config::new(
            "https://example.invalid".parse().expect("a URI"),
        ));
        assert!(!config.default_retry);
        assert_eq!(config.connect_timeout, Some(CONNECT_TIMEOUT));
        // kube-runtime's watchers ask the server to end a watch after 290 s and give up on a
        // silent one 5 s later: the read timeout must leave them that.
        assert!(
            config
                .read_timeout
                .is_some_and(|t| t > Duration::from_secs(295))
        );
        assert!(config.reset_reader_on_write);
    }

    #[test]
    fn a_lease_duration_on_stop_of_zero_or_beyond_the_lease_is_refused() {
        for seconds in [0, 3601] {
            let options = OperatorOptions {
                lease_duration_on_stop: Duration::from_secs(seconds),
                ..OperatorOptions::default()
            };
            let error = options.validate().expect_err("refused");
            assert!(
                error.to_string().contains("--lease-duration-on-stop"),
                "{error}"
            );
        }
        let hour = OperatorOptions {
            lease_duration_on_stop: Duration::from_secs(3600),
            ..OperatorOptions::default()
        };
        assert_eq!(hour.validate(), Ok(()));
    }

    #[test]
    fn an_api_call_timeout_of_zero_is_refused() {
        let options = OperatorOptions {
            api_call_timeout: Duration::ZERO,
            ..OperatorOptions::default()
        };
        let error = options.validate().expect_err("zero");
        assert!(error.to_string().contains("--api-call-timeout"), "{error}");
    }

    #[test]
    fn a_budget_of_zero_or_a_malformed_one_is_refused_with_the_flag_named() {
        let valid = OperatorOptions::default();
        for (options, flag, value) in [
            (
                OperatorOptions {
                    max_parallel_maintenances: Some("0".into()),
                    ..valid.clone()
                },
                "--max-parallel-maintenances",
                "`0`",
            ),
            (
                OperatorOptions {
                    max_parallel_maintenances: Some("ten%".into()),
                    ..valid.clone()
                },
                "--max-parallel-maintenances",
                "`ten%`",
            ),
            (
                OperatorOptions {
                    max_unavailable_nodes: Some("0%".into()),
                    ..valid.clone()
                },
                "--max-unavailable-nodes",
                "`0%`",
            ),
            (
                OperatorOptions {
                    max_unavailable_nodes: Some("120%".into()),
                    ..valid.clone()
                },
                "--max-unavailable-nodes",
                "`120%`",
            ),
        ] {
            let error = options.validate().expect_err(flag).to_string();
            assert!(error.starts_with(flag) && error.contains(value), "{error}");
        }
        let budget = OperatorOptions {
            max_parallel_maintenances: Some("10%".into()),
            max_unavailable_nodes: Some("3".into()),
            ..valid.clone()
        };
        assert_eq!(budget.validate(), Ok(()));
        assert_eq!(
            budget.actor_config().fleet,
            FleetBudget {
                max_parallel: Some(Limit::Percent(10)),
                max_unavailable: Some(Limit::Count(3)),
            }
        );
        assert!(
            !valid.actor_config().fleet.is_limited(),
            "no limit by default"
        );
    }

    #[test]
    fn eviction_limits_that_stop_every_eviction_are_refused() {
        let valid = OperatorOptions::default();
        assert_eq!(valid.validate(), Ok(()));
        for (options, expected) in [
            (
                OperatorOptions {
                    eviction_rate: 0.0,
                    ..valid.clone()
                },
                "--eviction-rate",
            ),
            (
                OperatorOptions {
                    eviction_rate: f64::NAN,
                    ..valid.clone()
                },
                "--eviction-rate",
            ),
            (
                OperatorOptions {
                    eviction_burst: 0,
                    ..valid.clone()
                },
                "--eviction-burst",
            ),
            (
                OperatorOptions {
                    max_evictions_in_flight: 0,
                    ..valid.clone()
                },
                "--max-evictions-in-flight",
            ),
            (
                OperatorOptions {
                    lease_namespace: " ".into(),
                    ..valid.clone()
                },
                "LEASE_NAMESPACE",
            ),
        ] {
            let error = options.validate().expect_err(expected);
            assert!(error.to_string().contains(expected), "{error}");
        }
    }
}
