//! Shortening the node leases a stopping leader leaves behind.
//!
//! A node lease says "hands off" to Node Health Check and Self Node Remediation for
//! `leaseDurationSeconds` (3600, the Go operator's) after its last renewal. While nmo runs it
//! renews them; a stopped nmo leaves them valid for up to an hour. What is needed after a stop
//! is only the time a successor takes to pick the maintenances up: a standby replica leads
//! within seconds, a replaced pod within a minute or two, and each maintenance renews its
//! lease (back to 3600 s) as it starts. So a replica told to stop rewrites every node lease it
//! holds to end `--lease-duration-on-stop` from now (5 minutes by default), whether or not a
//! successor is there: with one, nothing changes for anybody; without one (the last replica
//! scaled away, an uninstall that stranded a lease), the lease lapses within minutes. It is
//! not released outright: the node is still in maintenance, and a restart must not open a
//! window for a remediation.
//!
//! Each rewrite is conditional on the lease's resourceVersion: a lease someone else took or
//! renewed meanwhile is left alone. The rewrite runs after the actors have stopped (nothing of
//! theirs can land later) and before the leader lease is given up (no successor acts yet).

use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use nmo_actors::model::LEASE_HOLDER;

use crate::cluster::convert::{from_timestamp, to_timestamp};

/// Why the node leases could not be looked at.
#[derive(Debug, thiserror::Error)]
pub enum ShortenError {
    /// The leases could not be listed.
    #[error("cannot list the node leases in {namespace}: {source}")]
    List {
        /// The lease namespace.
        namespace: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// No answer in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// Rewrites every lease of `namespace` held by `node-maintenance` that is valid for longer
/// than `bound` to end `bound` from now; returns how many it rewrote. Each call has
/// `call_timeout`; a lease that cannot be rewritten is logged and skipped.
pub async fn shorten_node_leases(
    client: &Client,
    namespace: &str,
    bound: Duration,
    call_timeout: Duration,
) -> Result<usize, ShortenError> {
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let leases = match tokio::time::timeout(call_timeout, api.list(&ListParams::default())).await {
        Ok(Ok(list)) => list.items,
        Ok(Err(source)) => {
            return Err(ShortenError::List {
                namespace: namespace.to_string(),
                source,
            });
        }
        Err(_) => return Err(ShortenError::Timeout(call_timeout)),
    };
    let now = Utc::now();
    let mut shortened = 0;
    for lease in leases {
        let Some(short) = shortened_lease(&lease, now, bound) else {
            continue;
        };
        let name = lease.name_any();
        let written = tokio::time::timeout(
            call_timeout,
            api.replace(&name, &PostParams::default(), &short),
        )
        .await;
        match written {
            Ok(Ok(_)) => shortened += 1,
            Ok(Err(error)) => {
                tracing::warn!(lease = %name, %error, "cannot shorten the node lease; it lapses on its own");
            }
            Err(_) => {
                tracing::warn!(lease = %name, "no answer in time shortening the node lease");
            }
        }
    }
    if shortened > 0 {
        tracing::info!(
            shortened,
            valid_for = ?bound,
            "node leases shortened: a successor renews them as it resumes each maintenance"
        );
    }
    Ok(shortened)
}

/// The lease rewritten to end `bound` after `now`, when it is nmo's and valid for longer.
fn shortened_lease(lease: &Lease, now: chrono::DateTime<Utc>, bound: Duration) -> Option<Lease> {
    let spec = lease.spec.as_ref()?;
    if spec.holder_identity.as_deref() != Some(LEASE_HOLDER) {
        return None;
    }
    let renewed = from_timestamp(&spec.renew_time.as_ref()?.0);
    let seconds = i64::from(spec.lease_duration_seconds?);
    let expiry = renewed + chrono::Duration::seconds(seconds);
    let bound_seconds = i32::try_from(bound.as_secs()).ok()?.max(1);
    let new_expiry = now + chrono::Duration::seconds(i64::from(bound_seconds));
    if expiry <= new_expiry {
        return None;
    }
    let mut short = lease.clone();
    let spec = short.spec.as_mut()?;
    spec.renew_time = Some(MicroTime(to_timestamp(&now)));
    spec.lease_duration_seconds = Some(bound_seconds);
    Some(short)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;

    use super::*;

    fn lease(holder: &str, renewed_ago: i64, duration: i32) -> Lease {
        let renewed = Utc::now() - chrono::Duration::seconds(renewed_ago);
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                renew_time: Some(MicroTime(to_timestamp(&renewed))),
                lease_duration_seconds: Some(duration),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    const BOUND: Duration = Duration::from_secs(300);

    #[test]
    fn a_lease_of_nmo_valid_for_longer_ends_after_the_bound() {
        let now = Utc::now();
        let short = shortened_lease(&lease(LEASE_HOLDER, 10, 3600), now, BOUND).expect("shorter");
        let spec = short.spec.expect("a spec");
        assert_eq!(spec.lease_duration_seconds, Some(300));
        assert_eq!(spec.holder_identity.as_deref(), Some(LEASE_HOLDER));
        let renewed = spec.renew_time.expect("renewed").0;
        assert_eq!(renewed.as_second(), now.timestamp());
    }

    #[test]
    fn leases_of_others_and_leases_ending_sooner_are_left_alone() {
        let now = Utc::now();
        assert!(shortened_lease(&lease("node-healthcheck", 10, 3600), now, BOUND).is_none());
        assert!(shortened_lease(&lease(LEASE_HOLDER, 3500, 3600), now, BOUND).is_none());
        assert!(shortened_lease(&lease(LEASE_HOLDER, 7200, 3600), now, BOUND).is_none());
        assert!(shortened_lease(&Lease::default(), now, BOUND).is_none());
    }
}
