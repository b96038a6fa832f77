//! Coexistence with the Go operator: nmo never drives nodes while another node maintenance
//! operator does.
//!
//! Both read the same NodeMaintenances and write the same node marks and leases, so two of them
//! at once would cordon, drain and undo the same node twice over. The Go operator runs with
//! controller-runtime's leader election, lease `135b1886.medik8s.io` in its own namespace,
//! renewed every 2 s; nmo elects with the same lease id in its own namespace, so a Go operator
//! in nmo's namespace is already kept out by the election, and the one to look for holds that
//! lease in any other namespace (or in any namespace at all when nmo runs without election).
//!
//! How it is looked for: a LIST of the leases named `135b1886.medik8s.io` in every namespace
//! (field selector `metadata.name`, served from the API server's watch cache), every
//! `--go-operator-check-interval` (10 s). A watch would see a start at once, but its filter
//! would run on the API server for every Lease change of the cluster, the kubelets' heartbeats
//! included (a 5,000-node cluster renews 500 node leases a second), and it would bring nmo
//! every renewal of every election lease it matches; the slow poll costs one small request
//! every 10 s whatever the cluster's size, and sees an operator start within 10 s and go
//! within its lease's duration plus 10 s. RBAC allows exactly that list (`resourceNames`).
//!
//! While one runs ([`sightings`] decides), the leader stops its actors as it does on a
//! handover (their calls in flight are aborted and awaited) and starts them again, from what
//! the cluster says, once it is gone: maintenances already under way stay as they are, and the
//! other operator, which reads the same objects, carries them on. It says so in a Warning event
//! on the NodeMaintenance CRD (`GoOperatorRunning`, then `GoOperatorGone`), a log line, and the
//! body of `/readyz` (which stays ready: the webhook still serves).

mod readyz;
mod report;
pub mod sightings;

use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::cluster::convert::from_timestamp;
use crate::leader::LEADER_ELECTION_ID;
pub use readyz::{CoexistenceStatus, annotate_readyz};
pub use sightings::{HolderKind, Sighting};
use sightings::{LeaseView, Sightings};

/// What the detection is set up with.
#[derive(Debug, Clone)]
pub struct CoexistenceConfig {
    /// nmo's own election namespace (its lease there is nmo's), when it elects.
    pub own_election_namespace: Option<String>,
    /// How often to look.
    pub interval: Duration,
    /// How long one LIST may take.
    pub call_timeout: Duration,
    /// The instance nmo's events are reported by (its pod).
    pub instance: Option<String>,
}

/// What is known about other operators.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// Not looked yet.
    Unknown,
    /// None runs (or nmo cannot tell: see the log).
    Alone,
    /// These run.
    Running(Vec<Sighting>),
}

/// The detection, running in the background while this replica leads.
pub struct GoOperatorWatch {
    verdict: watch::Receiver<Verdict>,
    task: JoinHandle<()>,
}

impl GoOperatorWatch {
    /// Starts looking, reporting changes to `status` (for `/readyz`), the log and events.
    pub fn start(
        client: Client,
        config: CoexistenceConfig,
        status: CoexistenceStatus,
    ) -> GoOperatorWatch {
        let (send, verdict) = watch::channel(Verdict::Unknown);
        let task = tokio::spawn(look(client, config, status, send));
        GoOperatorWatch { verdict, task }
    }

    /// Completes once nmo has looked and no other operator runs; calls `paused` first if
    /// one does. Cancel-safe (`paused` may then have been called).
    pub async fn alone(&mut self, paused: impl FnOnce()) {
        let looked = self
            .verdict
            .wait_for(|verdict| *verdict != Verdict::Unknown)
            .await
            .map(|verdict| *verdict == Verdict::Alone);
        match looked {
            Ok(true) => return,
            Ok(false) => paused(),
            Err(_) => std::future::pending().await,
        }
        let _ = self
            .verdict
            .wait_for(|verdict| *verdict == Verdict::Alone)
            .await;
    }

    /// Completes when another operator is seen running; returns who. Cancel-safe.
    pub async fn other_runs(&mut self) -> Vec<Sighting> {
        let seen = self
            .verdict
            .wait_for(|verdict| matches!(verdict, Verdict::Running(_)))
            .await
            .map(|verdict| previous_sightings(&verdict));
        match seen {
            Ok(sightings) => sightings,
            // The task is gone (it never ends on its own): nothing more will be seen.
            Err(_) => std::future::pending().await,
        }
    }
}

impl Drop for GoOperatorWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Polls until aborted. A failed look keeps the last verdict. A first look that the API server
/// refuses for good (RBAC without the rule, say: [`fails_for_good`]) counts as alone, with a
/// warning: nmo cannot tell, and an nmo that never drives because of a missing grant would be
/// worse. A first look that fails for a while (a server still starting answers 429 or 5xx) is
/// tried again: nmo does not drive before it knows.
async fn look(
    client: Client,
    config: CoexistenceConfig,
    status: CoexistenceStatus,
    verdict: watch::Sender<Verdict>,
) {
    let api: Api<Lease> = Api::all(client.clone());
    let params = ListParams::default()
        .fields(&format!("metadata.name={LEADER_ELECTION_ID}"))
        .match_any();
    let reporter = report::Reporter::new(client, config.instance.clone(), status);
    let mut sightings = Sightings::default();
    let mut ticks = tokio::time::interval(config.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let listed = tokio::time::timeout(config.call_timeout, api.list(&params)).await;
        let leases = match listed {
            Ok(Ok(list)) => list.items,
            failed => {
                let (why, for_good) = match failed {
                    Ok(Err(error)) => (error.to_string(), fails_for_good(&error)),
                    _ => (format!("no answer within {:?}", config.call_timeout), false),
                };
                let first = *verdict.borrow() == Verdict::Unknown;
                reporter.cannot_look(&why, first, for_good);
                if for_good {
                    verdict.send_if_modified(settle_unknown);
                }
                continue;
            }
        };
        let views: Vec<LeaseView> = leases
            .iter()
            .filter(|lease| {
                lease.namespace().as_deref() != config.own_election_namespace.as_deref()
            })
            .map(view)
            .collect();
        let running = sightings.observe(&views, Instant::now(), Utc::now(), config.interval);
        let next = if running.is_empty() {
            Verdict::Alone
        } else {
            Verdict::Running(running)
        };
        let previous = verdict.borrow().clone();
        if previous != next {
            reporter
                .changed(&previous_sightings(&previous), &previous_sightings(&next))
                .await;
            verdict.send_replace(next);
        }
    }
}

/// Whether a look will keep failing however long nmo waits: the API server does not allow it
/// (401, 403) or does not serve it (404). Anything else (a timeout, a 429 or a 5xx of a server
/// that is starting or overloaded) passes.
fn fails_for_good(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if matches!(status.code, 401 | 403 | 404))
}

/// A first look that failed for good settles the verdict as alone; true when it changed.
fn settle_unknown(verdict: &mut Verdict) -> bool {
    if *verdict == Verdict::Unknown {
        *verdict = Verdict::Alone;
        true
    } else {
        false
    }
}

fn previous_sightings(verdict: &Verdict) -> Vec<Sighting> {
    match verdict {
        Verdict::Running(sightings) => sightings.clone(),
        Verdict::Unknown | Verdict::Alone => Vec::new(),
    }
}

fn view(lease: &Lease) -> LeaseView {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaseView {
        namespace: lease.namespace().unwrap_or_default(),
        holder: spec.holder_identity,
        renewed: spec.renew_time.map(|time| from_timestamp(&time.0)),
        duration_seconds: spec.lease_duration_seconds,
        resource_version: lease.resource_version().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            message: format!("answered {code}"),
            ..kube::core::Status::default()
        }))
    }

    #[test]
    fn a_refusal_fails_for_good_and_a_busy_server_does_not() {
        for code in [401, 403, 404] {
            assert!(fails_for_good(&api_error(code)), "{code}");
        }
        for code in [429, 500, 503, 504] {
            assert!(!fails_for_good(&api_error(code)), "{code}");
        }
    }

    #[test]
    fn only_a_first_verdict_is_settled_as_alone() {
        let mut unknown = Verdict::Unknown;
        assert!(settle_unknown(&mut unknown));
        assert_eq!(unknown, Verdict::Alone);
        let mut running = Verdict::Running(Vec::new());
        assert!(!settle_unknown(&mut running));
        assert_eq!(running, Verdict::Running(Vec::new()));
    }
}
