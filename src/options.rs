//! The operator's flags (`nmo run`'s, the Go operator's names where it has them) and the checks
//! that refuse values nmo would misbehave with later: the first step of start-up.

use std::path::PathBuf;
use std::time::Duration;

use kube::Client;
use nmo_actors::config::{Config, defaults};
use nmo_actors::fleet::{FleetBudget, Limit, LimitError};

use crate::cli::duration::parse_duration;
use crate::cli::go_flags::parse_go_bool;
use crate::coexistence::{CoexistenceConfig, CoexistenceStatus, GoOperatorWatch};
use crate::leader::{LeaderConfig, LeaderConfigError};
use crate::webhook;

/// The operator's flags (the Go operator's names where it has them).
#[derive(Debug, Clone, clap::Args)]
pub struct OperatorOptions {
    /// The kubeconfig file to reach the cluster with (its current context). Unset: KUBECONFIG,
    /// else the pod's service account in a cluster, else `~/.kube/config`.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Where to serve Prometheus metrics (`:8443` = every interface); `0` disables it.
    #[arg(long, default_value = DEFAULT_METRICS_BIND_ADDRESS)]
    pub metrics_bind_address: String,
    /// Serve metrics over HTTPS to clients whose bearer token the API server authenticates
    /// (TokenReview) and authorizes for `get` on `/metrics` (SubjectAccessReview), as
    /// controller-runtime does; `--metrics-secure=false` serves plain HTTP to anyone.
    #[arg(long, env = "NMO_METRICS_SECURE", num_args = 0..=1, require_equals = true,
          default_value = "true", default_missing_value = "true", value_parser = parse_go_bool,
          value_name = "BOOL")]
    pub metrics_secure: bool,
    /// Directory with the metrics serving certificate; unset: a self-signed one made at
    /// start-up. The files are reloaded when they change.
    #[arg(long, value_name = "DIR")]
    pub metrics_cert_path: Option<PathBuf>,
    /// The certificate's file name in `--metrics-cert-path`.
    #[arg(long, default_value = "tls.crt", value_name = "FILE")]
    pub metrics_cert_name: String,
    /// The private key's file name in `--metrics-cert-path`.
    #[arg(long, default_value = "tls.key", value_name = "FILE")]
    pub metrics_cert_key: String,
    /// Where to serve `/healthz` and `/readyz`; `0` disables it.
    #[arg(long, default_value = ":8081")]
    pub health_probe_bind_address: String,
    /// Run only while holding the leader election lease `135b1886.medik8s.io`
    /// (`--leader-elect`, `--leader-elect=true|false`).
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false",
          default_missing_value = "true", value_parser = parse_go_bool, value_name = "BOOL")]
    pub leader_elect: bool,
    /// Namespace of the leader election lease. Unset: the pod's own namespace in a cluster, the
    /// kubeconfig context's outside one.
    #[arg(long, value_name = "NAMESPACE")]
    pub leader_election_namespace: Option<String>,
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
            kubeconfig: None,
            metrics_bind_address: DEFAULT_METRICS_BIND_ADDRESS.into(),
            metrics_secure: true,
            metrics_cert_path: None,
            metrics_cert_name: "tls.crt".into(),
            metrics_cert_key: "tls.key".into(),
            health_probe_bind_address: ":8081".into(),
            leader_elect: false,
            leader_election_namespace: None,
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

/// Where metrics are served by default: controller-runtime's HTTPS port, every interface.
pub const DEFAULT_METRICS_BIND_ADDRESS: &str = ":8443";

/// The longest `--api-call-timeout`: the kube client's own read timeout
/// (`api_client::operator_client::READ_TIMEOUT`), after which it gives a silent connection up
/// whatever the call's deadline.
pub const MAX_API_CALL_TIMEOUT: Duration = Duration::from_secs(300);

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
    /// A call could wait longer than anything is worth waiting for.
    #[error(
        "--api-call-timeout ({timeout:?}) must be at most {max:?}: the client gives a silent connection up after {max:?} anyway, and a hung call holds its maintenance's step (a lease renewal, say) that long"
    )]
    ApiCallTimeoutTooLong {
        /// The timeout asked for.
        timeout: Duration,
        /// The longest accepted.
        max: Duration,
    },
    /// `--leader-election-namespace` was given empty.
    #[error("--leader-election-namespace must not be empty (leave it out for the pod's namespace)")]
    LeaderElectionNamespace,
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
        if self.api_call_timeout > MAX_API_CALL_TIMEOUT {
            return Err(OptionsError::ApiCallTimeoutTooLong {
                timeout: self.api_call_timeout,
                max: MAX_API_CALL_TIMEOUT,
            });
        }
        if self
            .leader_election_namespace
            .as_deref()
            .is_some_and(|namespace| namespace.trim().is_empty())
        {
            return Err(OptionsError::LeaderElectionNamespace);
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
            own_election_namespace: self.leader_elect.then(|| self.election_namespace(client)),
            interval: self.go_operator_check_interval,
            call_timeout: self.api_call_timeout,
            instance: self.pod_name(),
        };
        Some(GoOperatorWatch::start(client.clone(), config, status))
    }

    /// The namespace of the leader election lease: `--leader-election-namespace`, else the
    /// client's namespace, which in a pod is the pod's own (kube reads the service account's
    /// namespace file) and outside a cluster the kubeconfig context's.
    pub fn election_namespace(&self, client: &Client) -> String {
        match &self.leader_election_namespace {
            Some(namespace) => namespace.clone(),
            None => client.default_namespace().to_string(),
        }
    }

    /// The election these options ask for (`--leader-elect`), if any.
    pub fn election(&self, client: &Client) -> Option<LeaderConfig> {
        self.leader_elect
            .then(|| self.leader_config(self.election_namespace(client)))
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
            call_places: crate::api_client::call_limit::calls_in_flight(
                self.max_evictions_in_flight,
            ),
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

/// This replica's identity in the election: the pod name plus a random suffix, so a restarted
/// pod with the same name does not inherit its predecessor's leadership.
fn leader_identity(pod_name: Option<String>) -> String {
    let pod = pod_name.unwrap_or_else(|| "nmo".to_string());
    format!("{pod}_{:016x}", rand::random::<u64>())
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn an_api_call_timeout_beyond_the_clients_own_is_refused() {
        let valid = OperatorOptions::default();
        for timeout in [Duration::from_secs(301), Duration::from_secs(86_400)] {
            let options = OperatorOptions {
                api_call_timeout: timeout,
                ..valid.clone()
            };
            let error = options.validate().expect_err("too long").to_string();
            assert!(
                error.starts_with("--api-call-timeout") && error.contains("at most 300s"),
                "{error}"
            );
        }
        let longest = OperatorOptions {
            api_call_timeout: MAX_API_CALL_TIMEOUT,
            ..valid
        };
        assert_eq!(longest.validate(), Ok(()));
    }

    #[test]
    fn an_empty_leader_election_namespace_is_refused() {
        let options = OperatorOptions {
            leader_election_namespace: Some(" ".into()),
            ..OperatorOptions::default()
        };
        let error = options.validate().expect_err("empty").to_string();
        assert!(error.contains("--leader-election-namespace"), "{error}");
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
