//! `nmo run`: the operator process, as a short sequence of steps, each in the module it
//! configures: the options are checked (`options`), the client counts its requests
//! (`observability::registry`), the servers start (`servers`), the replica wins the election
//! (`leader`), and the actors run fed by the NodeMaintenance watch (`controller`) while no
//! other operator drives nodes (`coexistence`), until nmo is told to stop (`stopping`: the
//! undos under way finish, the node leases are shortened) or something fails.

use std::future::Future;
use std::pin::Pin;

use kube::Client;

use nmo_actors::system::StartError;

use crate::api_client::ApiClientError;
pub use crate::api_client::operator_client::{
    CONNECT_TIMEOUT, OperatorClient, READ_TIMEOUT, client, client_config,
};
use crate::coexistence::{GoOperatorWatch, Sighting};
use crate::controller::{Controller, ControllerError};
use crate::leader::{LeaderError, Leadership};
use crate::observability::registry::Metrics;
pub use crate::options::{OperatorOptions, OptionsError};
use crate::rbac_check;
use crate::servers::{Probes, ServerError, Servers};
use crate::stopping;

/// Why the operator stopped other than being asked to.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// A flag has a value nmo refuses to run with.
    #[error("invalid flags: {0}")]
    Options(#[from] OptionsError),
    /// The kube client could not be built from the cluster configuration.
    #[error("cannot build the Kubernetes API client: {0}")]
    Client(#[from] ApiClientError),
    /// nmo's service account may not do what nmo needs (checked at start).
    #[error(transparent)]
    Rights(#[from] crate::rbac_check::MissingRights),
    /// A server could not start (a port in use, the webhook's certificate missing) or stopped.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// Leader election failed or leadership was lost.
    #[error(transparent)]
    Leader(#[from] LeaderError),
    /// The actor system did not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The NodeMaintenance watch or the supervisor stopped.
    #[error(transparent)]
    Controller(#[from] ControllerError),
}

/// Runs the operator against `client` until `shutdown` completes (then it stops the actors,
/// leaving every node as it is for the next leader) or until it fails.
pub async fn run(
    client: impl Into<OperatorClient>,
    options: OperatorOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), OperatorError> {
    options.validate()?;
    let client = client.into();
    // The rights nmo will use, the leader lease's in the election's namespace included.
    let leader_namespace = options
        .leader_elect
        .then(|| options.election_namespace(&client.client));
    let needs = rbac_check::needs(&options.lease_namespace, leader_namespace.as_deref());
    rbac_check::check(&client.client, &needs, options.api_call_timeout).await?;
    let (metrics, client) = Metrics::for_client(client);
    let probes = Probes::default();
    tokio::pin!(shutdown);
    let mut servers = tokio::select! {
        // Waiting for a webhook certificate nmo manages can take a while.
        () = &mut shutdown => return Ok(()),
        started = Servers::start(&options, &metrics, &probes, &client) => started?,
    };
    let outcome = async {
        if options.leader_elect {
            // A standby is ready: it serves probes and waits; only the leader watches.
            probes.readiness.standing_by();
            metrics.leadership.electing();
        }
        let leadership = tokio::select! {
            () = &mut shutdown => return Ok(()),
            error = servers.failed() => return Err(error.into()),
            won = Leadership::win(&client, options.election(&client)) => won?,
        };
        let steps = Leading {
            client: &client,
            options: &options,
            metrics: &metrics,
            probes: &probes,
            leadership: &leadership,
        };
        let outcome = steps.lead(&mut servers, shutdown.as_mut()).await;
        if outcome.is_ok() {
            leadership.step_down().await;
        }
        outcome
    }
    .await;
    servers.stop();
    outcome
}

/// What a replica that won the election works with.
struct Leading<'a> {
    client: &'a Client,
    options: &'a OperatorOptions,
    metrics: &'a Metrics,
    probes: &'a Probes,
    leadership: &'a Leadership,
}

impl Leading<'_> {
    /// Drives nodes while no other operator does: the actors stop while one does, as on a
    /// handover, and start again from the cluster once it is gone (`coexistence`). Told to
    /// stop, it lets the undos under way finish first, leading and watching as before, then
    /// stops the actors behind a closed fence and shortens the node leases they leave
    /// (`stopping`).
    async fn lead(
        &self,
        servers: &mut Servers,
        mut shutdown: Pin<&mut impl Future<Output = ()>>,
    ) -> Result<(), OperatorError> {
        let options = self.options;
        let fence = self.leadership.fence();
        let mut others = options.go_operator_watch(self.client, self.probes.coexistence.clone());
        let lost = self.leadership.lost();
        tokio::pin!(lost);
        let (mut controller, mut outcome) = loop {
            if let Some(others) = others.as_mut() {
                let paused = tokio::select! {
                    () = &mut shutdown => Some(Ok(())),
                    lost = &mut lost => Some(Err(lost.into())),
                    error = servers.failed() => Some(Err(error.into())),
                    // Paused, a replica is ready as a standby is: its webhook still serves.
                    () = others.alone(|| self.probes.readiness.standing_by()) => None,
                };
                if let Some(outcome) = paused {
                    break (None, outcome);
                }
            }
            let mut controller = Controller::start(
                self.client.clone(),
                options,
                self.metrics,
                &fence,
                self.probes,
            )
            .await?;
            self.metrics.leadership.leading();
            let ended = tokio::select! {
                () = &mut shutdown => Some(Ok(())),
                error = controller.failed() => Some(Err(error.into())),
                lost = &mut lost => Some(Err(lost.into())),
                error = servers.failed() => Some(Err(error.into())),
                _ = other_runs(&mut others) => None,
            };
            if let Some(outcome) = ended {
                break (Some(controller), outcome);
            }
            tracing::info!("stopping the actors while another operator drives nodes");
            self.metrics.leadership.standing_by();
            controller.stop().await;
        };
        if outcome.is_ok()
            && let Some(controller) = controller.as_mut()
        {
            outcome = tokio::select! {
                () = stopping::let_undos_finish(
                    self.client,
                    options.graceful_shutdown_timeout,
                    options.api_call_timeout,
                ) => Ok(()),
                error = controller.failed() => Err(error.into()),
                lost = &mut lost => Err(lost.into()),
            };
        }
        self.metrics.leadership.standing_by();
        // Nothing may be written from now on; the actors' in-flight calls are aborted and
        // awaited before the leader lease is released (a successor acts only after that).
        fence.close();
        if let Some(controller) = controller {
            controller.stop().await;
            // Paused, the leases are the other operator's to keep.
            if outcome.is_ok() {
                self.shorten_node_leases().await;
            }
        }
        outcome
    }

    /// The node leases a stopping leader leaves behind lapse after `--lease-duration-on-stop`
    /// unless a successor renews them (`stopping`); a failure only costs that they last longer.
    async fn shorten_node_leases(&self) {
        let options = self.options;
        if let Err(error) = stopping::shorten_node_leases(
            self.client,
            &options.lease_namespace,
            options.lease_duration_on_stop,
            options.api_call_timeout,
        )
        .await
        {
            tracing::warn!(%error, "cannot shorten the node leases; they lapse an hour after their last renewal");
        }
    }
}

/// Completes when another operator is seen running; never without the check.
async fn other_runs(others: &mut Option<GoOperatorWatch>) -> Vec<Sighting> {
    match others {
        Some(others) => others.other_runs().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kube::Client;

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
}
