//! Lease-based leader election (`--leader-elect`), with controller-runtime's lease name, timings
//! and meaning, so that an nmo replica and a Go operator replica never both lead.
//!
//! A replica leads while it holds the Lease `135b1886.medik8s.io` in its own namespace. It renews
//! the lease every `retry_period`; a standby takes the lease over once it has not been renewed
//! for `lease_duration`. A leader that cannot renew within `renew_deadline` stops leading (the
//! process exits, as controller-runtime does), so two leaders never overlap by more than the
//! clock skew between them.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::PostParams;
use kube::{Api, Client};

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
    /// The lease was not renewed within the renew deadline: another replica may lead now.
    #[error("lost leadership: the lease was not renewed within {0:?}")]
    Lost(Duration),
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
}

/// One replica's side of the election.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderConfig,
}

impl LeaderElector {
    /// An elector for `config` over `client`.
    pub fn new(client: Client, config: LeaderConfig) -> Self {
        let api = Api::namespaced(client, &config.namespace);
        LeaderElector { api, config }
    }

    /// Waits until this replica leads. Failures to reach the API are retried.
    pub async fn acquire(&self) -> Result<(), LeaderError> {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    tracing::info!(identity = %self.config.identity, "became leader");
                    return Ok(());
                }
                Ok(false) => {}
                Err(error) => tracing::warn!(%error, "leader election attempt failed"),
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    /// Renews the lease until renewal fails for longer than the renew deadline; returns why
    /// leadership ended. Cancel the future (drop it) to stop renewing.
    pub async fn hold(&self) -> LeaderError {
        let mut last_renewal = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => last_renewal = tokio::time::Instant::now(),
                Ok(false) => return LeaderError::Lost(self.config.renew_deadline),
                Err(error) => tracing::warn!(%error, "leader lease renewal failed"),
            }
            if last_renewal.elapsed() > self.config.renew_deadline {
                return LeaderError::Lost(self.config.renew_deadline);
            }
        }
    }

    /// Gives the lease up (on graceful shutdown), so a standby takes over at once instead of
    /// after the lease expires.
    pub async fn release(&self) -> Result<(), LeaderError> {
        let Some(mut lease) = self
            .api
            .get_opt(LEADER_ELECTION_ID)
            .await
            .map_err(|e| self.error(e))?
        else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        self.api
            .replace(LEADER_ELECTION_ID, &PostParams::default(), &lease)
            .await
            .map(drop)
            .map_err(|e| self.error(e))
    }

    fn error(&self, source: kube::Error) -> LeaderError {
        LeaderError::Api {
            name: LEADER_ELECTION_ID.into(),
            source,
        }
    }

    /// One round: Ok(true) when this replica holds the lease afterwards.
    async fn try_acquire_or_renew(&self) -> Result<bool, LeaderError> {
        let now = Timestamp::now();
        let duration_seconds =
            i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let Some(mut lease) = self
            .api
            .get_opt(LEADER_ELECTION_ID)
            .await
            .map_err(|e| self.error(e))?
        else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(LEADER_ELECTION_ID.into()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.config.identity.clone()),
                    lease_duration_seconds: Some(duration_seconds),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(false),
                Err(error) => Err(self.error(error)),
            };
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let ours = spec.holder_identity.as_deref() == Some(self.config.identity.as_str());
        if !ours && is_held(spec, now) {
            return Ok(false);
        }
        if !ours {
            spec.holder_identity = Some(self.config.identity.clone());
            spec.acquire_time = Some(MicroTime(now));
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.renew_time = Some(MicroTime(now));
        spec.lease_duration_seconds = Some(duration_seconds);
        // The resourceVersion read above is the precondition: of two replicas racing for an
        // expired lease, exactly one wins.
        match self
            .api
            .replace(LEADER_ELECTION_ID, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.is_conflict() => Ok(false),
            Err(error) => Err(self.error(error)),
        }
    }
}

/// Whether someone holds the lease at `now`: a holder, renewed within the lease duration.
fn is_held(spec: &LeaseSpec, now: Timestamp) -> bool {
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    let (Some(renewed), Some(seconds)) = (spec.renew_time.as_ref(), spec.lease_duration_seconds)
    else {
        return false;
    };
    !holder.is_empty() && renewed.0 + SignedDuration::from_secs(i64::from(seconds)) > now
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(
        holder: Option<&str>,
        renewed_ago_seconds: i64,
        duration: i32,
    ) -> (LeaseSpec, Timestamp) {
        let now = Timestamp::now();
        let spec = LeaseSpec {
            holder_identity: holder.map(str::to_string),
            renew_time: Some(MicroTime(
                now - SignedDuration::from_secs(renewed_ago_seconds),
            )),
            lease_duration_seconds: Some(duration),
            ..LeaseSpec::default()
        };
        (spec, now)
    }

    #[test]
    fn a_recently_renewed_lease_is_held_and_an_old_or_released_one_is_not() {
        let (fresh, now) = spec(Some("a"), 5, 15);
        assert!(is_held(&fresh, now));
        let (expired, now) = spec(Some("a"), 16, 15);
        assert!(!is_held(&expired, now));
        let (released, now) = spec(None, 0, 1);
        assert!(!is_held(&released, now));
    }
}
