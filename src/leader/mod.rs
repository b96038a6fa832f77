//! Lease-based leader election (`--leader-elect`), with controller-runtime's lease name, timings
//! and meaning, so that an nmo replica and a Go operator replica never both lead.
//!
//! A replica leads while it holds the Lease `135b1886.medik8s.io` in its own namespace. It renews
//! the lease every `retry_period`. Like client-go, nobody compares the lease's `renewTime` with
//! its own clock: a standby remembers when, on its own monotonic clock, it last saw the lease
//! record change, and takes the lease over only once the record has stood still for the lease's
//! duration. Clock skew between machines therefore cannot make a standby steal a lease that is
//! being renewed, and no timestamp written by someone else is ever used in arithmetic (an absurd
//! `renewTime` or `leaseTransitions` cannot crash nmo).
//!
//! The leader counts its renew deadline on its own monotonic clock too, from the moment it sent
//! its last successful renewal: each renewal attempt is cut off at that deadline, and once it
//! passes the replica stops leading (the process exits, as controller-runtime's does). Because
//! `renew_deadline < lease_duration`, it stops before any standby can take over; [`Fence`] lets
//! writers check that before each write.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::time::Instant;

/// The Go operator's leader election id.
pub const LEADER_ELECTION_ID: &str = "135b1886.medik8s.io";

/// Why leader election failed.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The lease could not be read or written.
    #[error("leader election lease {name}: {source}")]
    Api {
        /// The lease's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A call to the API server did not answer within its deadline.
    #[error("leader election lease {name}: no answer within {deadline:?}")]
    Timeout {
        /// The lease's name.
        name: String,
        /// How long the call was given.
        deadline: Duration,
    },
    /// The lease was not renewed within the renew deadline: another replica may lead soon.
    #[error("lost leadership: the lease was not renewed within {0:?}")]
    Lost(Duration),
    /// Someone else holds the lease now.
    #[error("lost leadership: the lease is held by {0}")]
    Taken(String),
    /// The API server refuses the lease in this namespace (no right to it, or no such
    /// namespace): retrying cannot help, so nmo stops with this instead of retrying for ever.
    #[error(
        "cannot hold the leader election lease {LEADER_ELECTION_ID} in namespace {namespace}: {reason}; set --leader-election-namespace to nmo's own namespace, or grant get, create and update on leases there"
    )]
    NamespaceUnusable {
        /// The election's namespace.
        namespace: String,
        /// What the API server said.
        reason: String,
    },
}

/// Invalid leader election timings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaderConfigError {
    /// A duration is zero.
    #[error("--leader-elect-{0} must be greater than zero")]
    Zero(&'static str),
    /// The renew deadline does not leave room before the lease expires.
    #[error(
        "--leader-elect-renew-deadline ({renew_deadline:?}) must be shorter than --leader-elect-lease-duration ({lease_duration:?})"
    )]
    DeadlineNotBeforeExpiry {
        /// The renew deadline.
        renew_deadline: Duration,
        /// The lease duration.
        lease_duration: Duration,
    },
    /// Renewals are not attempted often enough to succeed within the deadline.
    #[error(
        "--leader-elect-retry-period ({retry_period:?}) must be shorter than --leader-elect-renew-deadline ({renew_deadline:?})"
    )]
    RetryNotBeforeDeadline {
        /// The retry period.
        retry_period: Duration,
        /// The renew deadline.
        renew_deadline: Duration,
    },
    /// The lease duration does not fit the Lease's `leaseDurationSeconds`.
    #[error("--leader-elect-lease-duration ({0:?}) is too long for a Lease")]
    TooLong(Duration),
}

/// Timings, controller-runtime's defaults.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    /// Namespace of the lease (nmo's own).
    pub namespace: String,
    /// Who this replica is (the pod name plus a random suffix).
    pub identity: String,
    /// How long a lease is valid after its last renewal.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leading.
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew.
    pub retry_period: Duration,
}

impl LeaderConfig {
    /// controller-runtime's defaults: 15 s lease, 10 s renew deadline, 2 s retry.
    pub fn new(namespace: String, identity: String) -> Self {
        LeaderConfig {
            namespace,
            identity,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// client-go's rules: every duration positive, `retry_period < renew_deadline <
    /// lease_duration` (a leader must give up before a standby may take over), and a duration a
    /// Lease can carry.
    pub fn validate(&self) -> Result<(), LeaderConfigError> {
        for (name, value) in [
            ("lease-duration", self.lease_duration),
            ("renew-deadline", self.renew_deadline),
            ("retry-period", self.retry_period),
        ] {
            if value.is_zero() {
                return Err(LeaderConfigError::Zero(name));
            }
        }
        if self.renew_deadline >= self.lease_duration {
            return Err(LeaderConfigError::DeadlineNotBeforeExpiry {
                renew_deadline: self.renew_deadline,
                lease_duration: self.lease_duration,
            });
        }
        if self.retry_period >= self.renew_deadline {
            return Err(LeaderConfigError::RetryNotBeforeDeadline {
                retry_period: self.retry_period,
                renew_deadline: self.renew_deadline,
            });
        }
        if i32::try_from(self.lease_duration_seconds()).is_err() {
            return Err(LeaderConfigError::TooLong(self.lease_duration));
        }
        Ok(())
    }

    /// The lease duration as a Lease carries it: whole seconds, at least one.
    fn lease_duration_seconds(&self) -> u64 {
        let started_second = u64::from(self.lease_duration.subsec_nanos() > 0);
        self.lease_duration
            .as_secs()
            .saturating_add(started_second)
            .max(1)
    }
}

/// Until when this replica may write as the leader, on its own monotonic clock. Cheap to clone;
/// shared between the elector (which extends it on each renewal) and the writers (which check
/// it before each write).
#[derive(Debug, Clone, Default)]
pub struct Fence {
    until: Arc<Mutex<Option<Instant>>>,
}

impl Fence {
    /// A fence that always allows writing (no leader election: the only replica).
    pub fn open() -> Self {
        Fence {
            until: Arc::new(Mutex::new(Some(far_future()))),
        }
    }

    /// Whether this replica may still write as the leader.
    pub fn allows_writes(&self) -> bool {
        self.deadline().is_some_and(|until| Instant::now() < until)
    }

    /// The moment writes stop being allowed, if they are allowed at all.
    pub fn deadline(&self) -> Option<Instant> {
        *self.until.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn extend_to(&self, until: Instant) {
        let mut guard = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        *guard = Some(guard.map_or(until, |current| current.max(until)));
    }

    /// Writing stops at once (leadership ended or is being handed over).
    pub fn close(&self) {
        *self.until.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

/// An instant no deadline reaches (about 30 years from now).
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(30 * 365 * 24 * 3600)
}

/// The lease record as last seen, and when (locally) it last changed.
#[derive(Debug, Clone)]
struct Observed {
    spec: LeaseSpec,
    changed_at: Instant,
}

/// One replica's side of the election.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderConfig,
    observed: Mutex<Option<Observed>>,
    /// The lease as this replica last wrote it: the next renewal writes over it without
    /// reading it first (see [`LeaderElector::renew`]).
    written: Mutex<Option<Lease>>,
    fence: Fence,
}

/// What one round of acquire-or-renew found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Round {
    /// This replica holds the lease now.
    Holding,
    /// Someone else holds a lease that is still valid.
    HeldBy(String),
    /// Another replica wrote the lease first.
    LostRace,
}

impl LeaderElector {
    /// An elector for `config` over `client`.
    pub fn new(client: Client, config: LeaderConfig) -> Self {
        let api = Api::namespaced(client, &config.namespace);
        LeaderElector {
            api,
            config,
            observed: Mutex::new(None),
            written: Mutex::new(None),
            fence: Fence::default(),
        }
    }

    /// The fence writers check: open while this replica leads and its renewals are on time.
    pub fn fence(&self) -> Fence {
        self.fence.clone()
    }

    /// Waits until this replica leads. Failures to reach the API are retried.
    pub async fn acquire(&self) -> Result<(), LeaderError> {
        loop {
            let sent = Instant::now();
            match self.round(self.config.renew_deadline).await {
                Ok(Round::Holding) => {
                    self.renewed(sent);
                    tracing::info!(identity = %self.config.identity, "became leader");
                    return Ok(());
                }
                Ok(Round::HeldBy(_) | Round::LostRace) => {}
                Err(error) => {
                    if let Some(reason) = refusal(&error) {
                        return Err(LeaderError::NamespaceUnusable {
                            namespace: self.config.namespace.clone(),
                            reason,
                        });
                    }
                    tracing::warn!(%error, "leader election attempt failed");
                }
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    /// Renews the lease until renewal fails for longer than the renew deadline or someone else
    /// takes it; returns why leadership ended (the fence is closed by then). Cancel the future
    /// (drop it) to stop renewing.
    pub async fn hold(&self) -> LeaderError {
        let error = self.renew_until_lost().await;
        self.fence.close();
        error
    }

    async fn renew_until_lost(&self) -> LeaderError {
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            let Some(deadline) = self.fence.deadline() else {
                return LeaderError::Lost(self.config.renew_deadline);
            };
            let sent = Instant::now();
            let Some(left) = deadline
                .checked_duration_since(sent)
                .filter(|d| !d.is_zero())
            else {
                return LeaderError::Lost(self.config.renew_deadline);
            };
            match self.renew(left).await {
                Ok(Round::Holding) => self.renewed(sent),
                Ok(Round::HeldBy(holder)) => return LeaderError::Taken(holder),
                Ok(Round::LostRace) => tracing::warn!("leader lease changed under the renewal"),
                Err(error) => tracing::warn!(%error, "leader lease renewal failed"),
            }
            if Instant::now() >= deadline {
                return LeaderError::Lost(self.config.renew_deadline);
            }
        }
    }

    /// A renewal sent at `sent` succeeded: writes are allowed until `sent + renew_deadline`.
    fn renewed(&self, sent: Instant) {
        self.fence.extend_to(sent + self.config.renew_deadline);
    }

    /// Gives the lease up (on graceful shutdown), so a standby takes over at once instead of
    /// after the lease expires. The fence closes first: nothing this replica still has in
    /// flight may write once the lease is given up.
    pub async fn release(&self) -> Result<(), LeaderError> {
        self.fence.close();
        let deadline = self.config.renew_deadline;
        let Some(mut lease) = self
            .call(deadline, self.api.get_opt(LEADER_ELECTION_ID))
            .await?
        else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        self.call(
            deadline,
            self.api
                .replace(LEADER_ELECTION_ID, &PostParams::default(), &lease),
        )
        .await
        .map(drop)
    }

    /// Runs one API call, cut off at `deadline`.
    async fn call<T>(
        &self,
        deadline: Duration,
        call: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, LeaderError> {
        match tokio::time::timeout(deadline, call).await {
            Ok(result) => result.map_err(|source| LeaderError::Api {
                name: LEADER_ELECTION_ID.into(),
                source,
            }),
            Err(_) => Err(LeaderError::Timeout {
                name: LEADER_ELECTION_ID.into(),
                deadline,
            }),
        }
    }

    /// One renewal, with every call cut off `deadline` from now. The lease as last written
    /// is written again with a new `renewTime`, its resourceVersion the precondition: one
    /// request where a read and a write would be two (client-go's fast path for the leader).
    /// If anything else wrote the lease meanwhile, or the write fails otherwise, a full round
    /// reads it and decides again.
    async fn renew(&self, deadline: Duration) -> Result<Round, LeaderError> {
        let until = Instant::now() + deadline;
        let last = self
            .written
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(lease) = last {
            let spec = lease.spec.clone().unwrap_or_default();
            let updated = Lease {
                spec: Some(self.claim(&spec, Timestamp::now())),
                ..lease
            };
            let params = PostParams::default();
            let call = self.api.replace(LEADER_ELECTION_ID, &params, &updated);
            match self.call(deadline, call).await {
                Ok(written) => {
                    self.wrote(written);
                    return Ok(Round::Holding);
                }
                Err(error) => {
                    tracing::debug!(%error, "leader lease renewal without a read failed; reading it")
                }
            }
        }
        self.round(until.saturating_duration_since(Instant::now()))
            .await
    }

    /// The lease as this replica just wrote it: what the next renewal writes over.
    fn wrote(&self, lease: Lease) {
        if let Some(spec) = &lease.spec {
            self.observe(spec);
        }
        *self.written.lock().unwrap_or_else(PoisonError::into_inner) = Some(lease);
    }

    /// One round of acquire-or-renew, with every call cut off `deadline` from now.
    async fn round(&self, deadline: Duration) -> Result<Round, LeaderError> {
        let until = Instant::now() + deadline;
        let left = || until.saturating_duration_since(Instant::now());
        let existing = self
            .call(left(), self.api.get_opt(LEADER_ELECTION_ID))
            .await?;
        let now = Timestamp::now();
        let Some(lease) = existing else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(LEADER_ELECTION_ID.into()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    lease_transitions: Some(0),
                    ..self.claim(&LeaseSpec::default(), now)
                }),
            };
            return match self
                .call(left(), self.api.create(&PostParams::default(), &lease))
                .await
            {
                Ok(written) => {
                    self.wrote(written);
                    Ok(Round::Holding)
                }
                Err(LeaderError::Api {
                    source: kube::Error::Api(status),
                    ..
                }) if status.is_already_exists() => Ok(Round::LostRace),
                Err(error) => Err(error),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let since = self.observe(&spec);
        if let Some(holder) = foreign_holder(&spec, &self.config.identity)
            && still_valid(&spec, since, Instant::now())
        {
            return Ok(Round::HeldBy(holder.to_string()));
        }
        let updated = Lease {
            spec: Some(self.claim(&spec, now)),
            ..lease
        };
        // The resourceVersion read above is the precondition: of two replicas racing for an
        // expired lease, exactly one wins.
        match self
            .call(
                left(),
                self.api
                    .replace(LEADER_ELECTION_ID, &PostParams::default(), &updated),
            )
            .await
        {
            Ok(written) => {
                self.wrote(written);
                Ok(Round::Holding)
            }
            Err(LeaderError::Api {
                source: kube::Error::Api(status),
                ..
            }) if status.is_conflict() => Ok(Round::LostRace),
            Err(error) => Err(error),
        }
    }

    /// Records `spec` as seen now; returns when (locally) the record last changed.
    fn observe(&self, spec: &LeaseSpec) -> Instant {
        let mut observed = self.observed.lock().unwrap_or_else(PoisonError::into_inner);
        match observed.as_ref() {
            Some(seen) if seen.spec == *spec => seen.changed_at,
            _ => {
                let now = Instant::now();
                *observed = Some(Observed {
                    spec: spec.clone(),
                    changed_at: now,
                });
                now
            }
        }
    }

    /// The record this replica writes to hold the lease: a renewal of its own record, or a
    /// takeover (one more transition, saturating) of anyone else's.
    fn claim(&self, current: &LeaseSpec, now: Timestamp) -> LeaseSpec {
        let ours = current.holder_identity.as_deref() == Some(self.config.identity.as_str());
        let duration = i32::try_from(self.config.lease_duration_seconds()).unwrap_or(i32::MAX);
        let (acquired, transitions) = if ours {
            (current.acquire_time.clone(), current.lease_transitions)
        } else {
            let previous = current.lease_transitions.unwrap_or(0).max(0);
            (Some(MicroTime(now)), Some(previous.saturating_add(1)))
        };
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(duration),
            acquire_time: acquired.or(Some(MicroTime(now))),
            renew_time: Some(MicroTime(now)),
            lease_transitions: transitions.or(Some(0)),
            ..current.clone()
        }
    }
}

/// The election step of start-up: whether this replica may act, and for how long.
pub enum Leadership {
    /// No election (`--leader-elect=false`): this replica acts from the start, for ever.
    Unelected,
    /// This replica won the election and acts while it holds the lease.
    Elected(Box<LeaderElector>),
}

impl Leadership {
    /// Without an election (`None`), at once; with one, once this replica holds the lease
    /// `135b1886.medik8s.io` in the election's namespace, retrying while another replica
    /// leads. A namespace the API server refuses the lease in is an error.
    pub async fn win(
        client: &Client,
        election: Option<LeaderConfig>,
    ) -> Result<Leadership, LeaderError> {
        let Some(config) = election else {
            return Ok(Leadership::Unelected);
        };
        tracing::info!(namespace = %config.namespace, "leader election lease namespace");
        let elector = LeaderElector::new(client.clone(), config);
        elector.acquire().await?;
        Ok(Leadership::Elected(Box::new(elector)))
    }

    /// The fence writers check: open while this replica may act.
    pub fn fence(&self) -> Fence {
        match self {
            Leadership::Unelected => Fence::open(),
            Leadership::Elected(elector) => elector.fence(),
        }
    }

    /// Completes when leadership is lost (never without an election); see
    /// [`LeaderElector::hold`].
    pub async fn lost(&self) -> LeaderError {
        match self {
            Leadership::Unelected => std::future::pending().await,
            Leadership::Elected(elector) => elector.hold().await,
        }
    }

    /// Gives the lease up on a clean stop, so that a standby takes over at once.
    pub async fn step_down(&self) {
        if let Leadership::Elected(elector) = self
            && let Err(error) = elector.release().await
        {
            tracing::warn!(%error, "could not release the leader lease; a standby takes over when it expires");
        }
    }
}

/// What the API server said when it refused the lease for good: 403 (no right to leases in
/// the namespace) or 404 (a lease cannot be created in a namespace that does not exist; a
/// missing lease itself is no error).
fn refusal(error: &LeaderError) -> Option<String> {
    match error {
        LeaderError::Api {
            source: kube::Error::Api(status),
            ..
        } if status.code == 403 || status.code == 404 => {
            Some(format!("{} ({})", status.message, status.code))
        }
        _ => None,
    }
}

/// The holder of `spec` when it is somebody other than `me` (an empty holder is nobody).
fn foreign_holder<'a>(spec: &'a LeaseSpec, me: &str) -> Option<&'a str> {
    spec.holder_identity
        .as_deref()
        .filter(|holder| !holder.is_empty() && *holder != me)
}

/// Whether a lease whose record last changed at `since` (local clock) is still valid at `now`:
/// for its own `leaseDurationSeconds` after that change (client-go's rule). A duration too long
/// to add counts as valid; a missing or negative one as expired.
fn still_valid(spec: &LeaseSpec, since: Instant, now: Instant) -> bool {
    let seconds = spec
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .unwrap_or(0);
    since
        .checked_add(Duration::from_secs(seconds))
        .is_none_or(|expiry| expiry > now)
}

#[cfg(test)]
mod tests;
