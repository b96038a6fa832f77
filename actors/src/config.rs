//! Tunables of the actor system, and the clock the actors read wall time from.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::fleet::FleetBudget;
use crate::observe::{self, Observer};
use crate::progress_pace::ProgressPace;

/// The defaults of [`Config`], one constant each so that command-line flags and tests can
/// name them; [`Config::default`] is built from these and nothing else.
pub mod defaults {
    use std::time::Duration;

    /// Namespace of the node leases: NMO's, shared with the other medik8s operators.
    pub const LEASE_NAMESPACE: &str = "medik8s-leases";
    /// `leaseDurationSeconds` written into the lease (NMO's).
    pub const LEASE_DURATION: Duration = Duration::from_secs(3600);
    /// Lease renewal: a third of the duration, so two renewals may fail before it lapses.
    pub const LEASE_RENEW_INTERVAL: Duration = Duration::from_secs(LEASE_DURATION.as_secs() / 3);
    /// NMO's requeue interval.
    pub const RETRY_INTERVAL: Duration = Duration::from_secs(5);
    /// Cluster-wide evictions per second.
    pub const EVICTION_RATE_PER_SEC: f64 = 50.0;
    /// Evictions allowed in a burst above the rate: a wave of about 20 nodes of 10 pods starts
    /// its drains at once (with 100, the last 40 of its 140 evictions waited 0.8 s for the
    /// rate); bigger waves still go at the rate. The in-flight limit still paces the burst.
    pub const EVICTION_BURST: u32 = 200;
    /// Evictions in flight at once, cluster wide.
    pub const EVICTION_MAX_IN_FLIGHT: usize = 32;
    /// API calls beside the evictions' own bound, so that status writes, node patches and
    /// watch LISTs always have places of their own while evictions run. With the default 32
    /// evictions, 64 calls in all: far below the 300 requests a flow may queue at
    /// `workload-low` on a default kube-apiserver, so that bursts of starting maintenances
    /// never fill them.
    pub const CALLS_BESIDE_EVICTIONS: usize = 32;
    /// Eviction requests held at once (queued, parked or in flight). A cap on memory (under a
    /// KiB each with the pod's names: some 40 MiB when full), sized for every pod of 2,000
    /// nodes x 30 pods. At 10,000, 500 drains of 30 pods at once (15,000 requests) had about
    /// 2,900 refusals: each one a report, a re-ask on the next retry tick, and a status saying
    /// "eviction queue full", written and then cleared, on a cluster doing nothing wrong.
    pub const EVICTION_QUEUE_BOUND: usize = 60_000;
    /// First backoff after a 429.
    pub const BACKOFF_BASE: Duration = Duration::from_secs(1);
    /// Backoff ceiling.
    pub const BACKOFF_MAX: Duration = Duration::from_secs(60);
    /// Minimum time between two status writes when the second has news (an error, a blocked
    /// pod, a condition's state).
    pub const STATUS_COALESCE: Duration = Duration::from_secs(1);
    /// Minimum time between two status writes when the second only reports progress (the
    /// percentage, the pods left): a drain of a minute writes its progress once or twice.
    pub const PROGRESS_COALESCE: Duration = Duration::from_secs(30);
    /// How long one API call may take before it counts as failed (a hung connection).
    pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);
    /// First wait before a failing step is tried again (then doubling, with jitter).
    pub const RETRY_BACKOFF_BASE: Duration = Duration::from_secs(1);
    /// Ceiling of the backoff between retries of a failing step.
    pub const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(120);
    /// First wait before a failed lease renewal is tried again.
    pub const LEASE_RETRY_BASE: Duration = Duration::from_secs(1);
    /// First wait before a crashed node actor is started again.
    pub const RESPAWN_BASE: Duration = Duration::from_secs(1);
    /// Ceiling of the wait before a crashed node actor is started again.
    pub const RESPAWN_MAX: Duration = Duration::from_secs(300);
    /// Maintenances resumed at once (after a restart or a leader handover) that start without
    /// waiting; the rest start at [`STARTUP_RATE_PER_SEC`].
    pub const STARTUP_BURST: u32 = 20;
    /// Resumed maintenances started per second after the burst.
    pub const STARTUP_RATE_PER_SEC: f64 = 20.0;
    /// Minimum time between two writes of a waiting maintenance's place in the queue: its
    /// first place is written at once, later moves at most this often for the first ten, and
    /// proportionally less often further back (a queue of hundreds must not cost a write per
    /// waiting maintenance every time one starts).
    pub const QUEUE_STATUS_INTERVAL: Duration = Duration::from_secs(30);
}

/// Source of wall-clock time for lease and status timestamps. Tests use [`TokioClock`] so that
/// paused tokio time and lease validity move together.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// Wall time derived from tokio's clock: an anchor plus tokio's elapsed time, so that
/// `tokio::time::pause`/`advance` also moves this clock.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    wall: DateTime<Utc>,
    instant: tokio::time::Instant,
}

impl TokioClock {
    /// Anchors the clock at `wall` now.
    pub fn starting_at(wall: DateTime<Utc>) -> Self {
        TokioClock {
            wall,
            instant: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> DateTime<Utc> {
        let elapsed = self.instant.elapsed();
        // chrono::Duration cannot overflow for any realistic test or process lifetime; fall
        // back to the anchor rather than panic.
        chrono::Duration::from_std(elapsed)
            .ok()
            .and_then(|d| self.wall.checked_add_signed(d))
            .unwrap_or(self.wall)
    }
}

/// Every tunable of the actor system.
#[derive(Clone)]
pub struct Config {
    /// Namespace of the node leases (`LEASE_NAMESPACE`, default [`defaults::LEASE_NAMESPACE`]).
    pub lease_namespace: String,
    /// `leaseDurationSeconds` written into the lease (3600 like NMO).
    pub lease_duration: Duration,
    /// How often a node actor renews its lease (default: a third of `lease_duration`).
    pub lease_renew_interval: Duration,
    /// Re-check interval of anything unfinished: lease wait, drain, failed steps (5 s, NMO's
    /// requeue).
    pub retry_interval: Duration,
    /// Cluster-wide evictions per second (token bucket refill rate).
    pub eviction_rate_per_sec: f64,
    /// Token bucket size (burst).
    pub eviction_burst: u32,
    /// Maximum evictions in flight at once.
    pub eviction_max_in_flight: usize,
    /// Maximum eviction requests held by the eviction actor (queued, parked or in flight);
    /// beyond it requests are refused back to the asker.
    pub eviction_queue_bound: usize,
    /// First backoff after a 429 (per PodDisruptionBudget, or global for throttling).
    pub backoff_base: Duration,
    /// Backoff ceiling.
    pub backoff_max: Duration,
    /// Minimum time between two status writes when the second has news (an error, a blocked
    /// pod, a condition's state; a phase change is written at once).
    pub status_coalesce: Duration,
    /// Minimum time between two status writes when the second only reports progress (the
    /// percentage, the pods left, the time to the deadline), for a drain running alone; the
    /// drains running at once share a pace ([`crate::progress_pace`]) that lengthens it.
    pub progress_coalesce: Duration,
    /// How many drains write progress at once, shared by this system's node actors.
    pub progress_pace: ProgressPace,
    /// How long one API call may take (see [`crate::call_deadline::Bounded`]).
    pub call_timeout: Duration,
    /// How many API calls the actors make at once; the others wait their turn before their
    /// request is built (see [`crate::call_deadline::Bounded`]).
    pub call_places: usize,
    /// First wait before a failing step is tried again (doubling, with jitter).
    pub retry_backoff_base: Duration,
    /// Ceiling of the backoff between retries of a failing step.
    pub retry_backoff_max: Duration,
    /// First wait before a failed lease renewal is tried again (doubling, up to the renewal
    /// interval).
    pub lease_retry_base: Duration,
    /// First wait before a crashed node actor is started again (doubling, with jitter).
    pub respawn_base: Duration,
    /// Ceiling of that wait.
    pub respawn_max: Duration,
    /// Resumed maintenances that start at once.
    pub startup_burst: u32,
    /// Resumed maintenances started per second after the burst.
    pub startup_rate_per_sec: f64,
    /// The cluster maintenance budget (default: no limit, NMO's behaviour).
    pub fleet: FleetBudget,
    /// Minimum time between two writes of a waiting maintenance's queue place.
    pub queue_status_interval: Duration,
    /// Prefix of node actor names (`<prefix>node/<nm-name>`); None = unnamed actors.
    pub actor_name_prefix: Option<String>,
    /// Wall clock.
    pub clock: Arc<dyn Clock>,
    /// Receives metrics-worthy happenings and new trace roots.
    pub observer: Arc<dyn Observer>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            lease_namespace: defaults::LEASE_NAMESPACE.to_string(),
            lease_duration: defaults::LEASE_DURATION,
            lease_renew_interval: defaults::LEASE_RENEW_INTERVAL,
            retry_interval: defaults::RETRY_INTERVAL,
            eviction_rate_per_sec: defaults::EVICTION_RATE_PER_SEC,
            eviction_burst: defaults::EVICTION_BURST,
            eviction_max_in_flight: defaults::EVICTION_MAX_IN_FLIGHT,
            eviction_queue_bound: defaults::EVICTION_QUEUE_BOUND,
            backoff_base: defaults::BACKOFF_BASE,
            backoff_max: defaults::BACKOFF_MAX,
            status_coalesce: defaults::STATUS_COALESCE,
            progress_coalesce: defaults::PROGRESS_COALESCE,
            progress_pace: ProgressPace::default(),
            call_timeout: defaults::CALL_TIMEOUT,
            call_places: defaults::EVICTION_MAX_IN_FLIGHT + defaults::CALLS_BESIDE_EVICTIONS,
            retry_backoff_base: defaults::RETRY_BACKOFF_BASE,
            retry_backoff_max: defaults::RETRY_BACKOFF_MAX,
            lease_retry_base: defaults::LEASE_RETRY_BASE,
            respawn_base: defaults::RESPAWN_BASE,
            respawn_max: defaults::RESPAWN_MAX,
            startup_burst: defaults::STARTUP_BURST,
            startup_rate_per_sec: defaults::STARTUP_RATE_PER_SEC,
            fleet: FleetBudget::default(),
            queue_status_interval: defaults::QUEUE_STATUS_INTERVAL,
            actor_name_prefix: Some(String::new()),
            clock: Arc::new(SystemClock),
            observer: observe::noop(),
        }
    }
}

impl Config {
    /// The defaults with the lease namespace taken from `LEASE_NAMESPACE` when set.
    pub fn from_env() -> Self {
        let mut config = Config::default();
        if let Ok(ns) = std::env::var("LEASE_NAMESPACE")
            && !ns.is_empty()
        {
            config.lease_namespace = ns;
        }
        config
    }

    /// The current wall time.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("lease_namespace", &self.lease_namespace)
            .field("lease_duration", &self.lease_duration)
            .field("lease_renew_interval", &self.lease_renew_interval)
            .field("retry_interval", &self.retry_interval)
            .field("eviction_rate_per_sec", &self.eviction_rate_per_sec)
            .field("eviction_burst", &self.eviction_burst)
            .field("eviction_max_in_flight", &self.eviction_max_in_flight)
            .field("eviction_queue_bound", &self.eviction_queue_bound)
            .field("backoff_base", &self.backoff_base)
            .field("backoff_max", &self.backoff_max)
            .field("status_coalesce", &self.status_coalesce)
            .field("progress_coalesce", &self.progress_coalesce)
            .field("progress_pace", &self.progress_pace)
            .field("call_timeout", &self.call_timeout)
            .field("retry_backoff_base", &self.retry_backoff_base)
            .field("retry_backoff_max", &self.retry_backoff_max)
            .field("lease_retry_base", &self.lease_retry_base)
            .field("respawn_base", &self.respawn_base)
            .field("respawn_max", &self.respawn_max)
            .field("startup_burst", &self.startup_burst)
            .field("startup_rate_per_sec", &self.startup_rate_per_sec)
            .field("fleet", &self.fleet)
            .field("queue_status_interval", &self.queue_status_interval)
            .field("actor_name_prefix", &self.actor_name_prefix)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_renewal_default_is_a_third_of_the_lease() {
        assert_eq!(defaults::LEASE_RENEW_INTERVAL, defaults::LEASE_DURATION / 3);
        let config = Config::default();
        assert_eq!(config.lease_namespace, "medik8s-leases");
        assert_eq!(config.lease_renew_interval, config.lease_duration / 3);
    }
}
