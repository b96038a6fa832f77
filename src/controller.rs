//! The actors step of start-up: the cluster adapter behind the leader's fence, the actor
//! system, the NodeMaintenance watch that feeds it, and what the probes learn of them (the
//! leader's watches for `/readyz`, the supervisor's heartbeat for `/healthz`). Stopped before
//! the leader lease is given up, so that nothing it began can land after a successor starts,
//! and while another operator drives nodes (`coexistence`), to start again once it is gone.

use std::sync::Arc;

use kube::Client;
use nmo_actors::config::Config;
use nmo_actors::ports::Cluster as _;
use nmo_actors::system::{self, ActorSystem, StartError};
use tokio::task::JoinHandle;

use crate::cluster::KubeCluster;
use crate::leader::Fence;
use crate::maintenance_watch::{self, WatchError};
use crate::observability::health;
use crate::observability::operator_metrics::ProcessObserver;
use crate::observability::registry::Metrics;
use crate::options::OperatorOptions;
use crate::servers::Probes;

/// Why the actors stopped working while nmo runs (they never do on their own).
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The NodeMaintenance watch stopped.
    #[error(transparent)]
    MaintenanceWatch(#[from] WatchError),
    /// The supervisor actor stopped: `/healthz` says so, and the process ends.
    #[error("the supervisor stopped")]
    SupervisorStopped,
}

/// The running actors, their watch, and the tasks that tell the probes about them.
pub struct Controller {
    actors: ActorSystem,
    watch: JoinHandle<WatchError>,
    /// Ends only when the supervisor stops.
    supervised: JoinHandle<()>,
    health_report: JoinHandle<()>,
}

impl Controller {
    /// Starts the actors, writing only while `fence` is open, and the NodeMaintenance watch
    /// feeding them (it tells the readiness probe once it has listed); from now on readiness
    /// follows the leader's watches, liveness the supervisor's heartbeat.
    pub async fn start(
        client: Client,
        options: &OperatorOptions,
        metrics: &Metrics,
        fence: &Fence,
        probes: &Probes,
    ) -> Result<Controller, StartError> {
        let (readiness, liveness) = (probes.readiness.clone(), probes.liveness.clone());
        let cluster = Arc::new(
            KubeCluster::new(client.clone(), options.pod_name())
                .with_fence(fence.clone())
                .with_call_timeout(options.api_call_timeout),
        );
        let initial_lists = cluster.initial_lists();
        let watches = cluster.watch_health();
        readiness.leading(watches.clone());
        let mut config = options.actor_config();
        ensure_lease_namespace(cluster.as_ref(), &config).await;
        let queue = metrics.maintenances.controller().clone();
        config.observer = ProcessObserver::new(metrics.maintenances.clone()).shared();
        let actors = system::start(cluster, config).await?;
        let watch = tokio::spawn(maintenance_watch::run(
            client,
            initial_lists,
            watches.clone(),
            actors.supervisor.clone(),
            readiness.clone(),
            queue,
        ));
        let health_report = tokio::spawn(health::report(
            readiness,
            liveness.clone(),
            watches,
            metrics.health.clone(),
        ));
        let supervisor = actors.supervisor.clone();
        let supervised = tokio::spawn(async move { liveness.watch_supervisor(supervisor).await });
        Ok(Controller {
            actors,
            watch,
            supervised,
            health_report,
        })
    }

    /// Completes if the NodeMaintenance watch stops feeding the actors or the supervisor stops
    /// (neither does on its own while they run). Cancel-safe.
    pub async fn failed(&mut self) -> ControllerError {
        tokio::select! {
            ended = &mut self.watch => match ended {
                Ok(error) => error.into(),
                Err(join) => {
                    WatchError::SupervisorGone(format!("the watch task ended: {join}")).into()
                }
            },
            _ = &mut self.supervised => ControllerError::SupervisorStopped,
        }
    }

    /// Stops the watch and the health tasks, then the actors, aborting and awaiting their
    /// calls in flight. A stop for good closes the fence first (nothing may be written from
    /// then on); a pause while another operator runs leaves it open, to start again.
    pub async fn stop(self) {
        tracing::info!("stopping the actors");
        self.health_report.abort();
        self.supervised.abort();
        self.watch.abort();
        self.actors.shutdown().await;
    }
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
