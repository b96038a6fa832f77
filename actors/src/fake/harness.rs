//! One harness for actor tests: the actor system started against a [`FakeCluster`], with the
//! cluster's NodeMaintenance changes fed to the supervisor the way the real controller feeds
//! them, and the waits tests need.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use ractor::ActorRef;
use tokio::task::JoinHandle;

use super::cluster::{FakeCluster, MaintenanceChange};
use super::fixtures::t0;
use crate::config::{Clock, Config, TokioClock};
use crate::eviction::{EvictionMsg, EvictionStats};
use crate::model::Phase;
use crate::supervisor::SupervisorMsg;
use crate::system::{ActorSystem, StartError, start};

/// How often [`eventually`] looks again.
const POLL: Duration = Duration::from_millis(20);

/// The configuration for tests under paused tokio time: unnamed actors (tests run in
/// parallel and actor names are process-global) and a wall clock anchored at [`t0`] that
/// moves with tokio's, so lease validity follows `tokio::time::advance`.
pub fn paused_config() -> Config {
    Config {
        actor_name_prefix: None,
        clock: Arc::new(TokioClock::starting_at(t0())),
        ..Config::default()
    }
}

/// Waits until `cond` holds, looking every 20 ms (of tokio time, paused or not); false once
/// `within` has passed without it.
pub async fn eventually(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Plays the controller: sends every NodeMaintenance change of `cluster` (the current objects
/// first) to `supervisor`, until either side is gone.
pub fn feed(cluster: &FakeCluster, supervisor: ActorRef<SupervisorMsg>) -> JoinHandle<()> {
    let mut changes = cluster.subscribe_maintenances();
    tokio::spawn(async move {
        while let Some(change) = changes.recv().await {
            let msg = match change {
                MaintenanceChange::Upsert(nm) => SupervisorMsg::Upsert(nm),
                MaintenanceChange::Listed => SupervisorMsg::Listed,
                MaintenanceChange::Deleted { name, uid } => SupervisorMsg::Deleted { name, uid },
            };
            if supervisor.cast(msg).is_err() {
                return;
            }
        }
    })
}

/// The actor system running against a fake cluster, fed by it. Dropping it stops the feeder
/// and the actors without waiting; [`Harness::stop`] waits for them.
pub struct Harness {
    cluster: FakeCluster,
    clock: Arc<dyn Clock>,
    system: Option<ActorSystem>,
    feeder: JoinHandle<()>,
}

impl Harness {
    /// Starts the actors against `cluster` with `config`.
    pub async fn start(cluster: &FakeCluster, config: Config) -> Result<Self, StartError> {
        let clock = config.clock.clone();
        let system = start(Arc::new(cluster.clone()), config).await?;
        let feeder = feed(cluster, system.supervisor.clone());
        Ok(Harness {
            cluster: cluster.clone(),
            clock,
            system: Some(system),
            feeder,
        })
    }

    /// Starts the actors against `cluster` with [`paused_config`] as it is (the defaults).
    ///
    /// # Panics
    /// If the actors cannot start (a test cannot go on then).
    pub async fn on(cluster: &FakeCluster) -> Self {
        Harness::paused(cluster, |_| {}).await
    }

    /// Starts the actors against `cluster` with [`paused_config`] changed by `tweak`.
    ///
    /// # Panics
    /// If the actors cannot start (a test cannot go on then).
    pub async fn paused(cluster: &FakeCluster, tweak: impl FnOnce(&mut Config)) -> Self {
        let mut config = paused_config();
        tweak(&mut config);
        Harness::started(cluster, config).await
    }

    /// Starts the actors against `cluster` with `config`, panicking if they cannot start.
    pub(super) async fn started(cluster: &FakeCluster, config: Config) -> Self {
        match Harness::start(cluster, config).await {
            Ok(harness) => harness,
            Err(err) => panic!("cannot start the actors: {err}"),
        }
    }

    /// The cluster the actors run against.
    pub fn cluster(&self) -> &FakeCluster {
        &self.cluster
    }

    /// The wall time as the actors see it.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// The supervisor.
    ///
    /// # Panics
    /// After [`Harness::stop`] (it consumes the harness, so never in practice).
    pub fn supervisor(&self) -> &ActorRef<SupervisorMsg> {
        &self.system().supervisor
    }

    fn system(&self) -> &ActorSystem {
        match &self.system {
            Some(system) => system,
            None => unreachable!("the system is only taken by stop and drop"),
        }
    }

    /// Names of the NodeMaintenances with a live node actor.
    ///
    /// # Panics
    /// If the supervisor does not answer.
    pub async fn active(&self) -> Vec<String> {
        match ractor::call!(self.supervisor(), SupervisorMsg::Active) {
            Ok(names) => names,
            Err(err) => panic!("the supervisor does not answer: {err}"),
        }
    }

    /// Names of the NodeMaintenances waiting for the cluster maintenance budget, in queue
    /// order.
    ///
    /// # Panics
    /// If the supervisor does not answer.
    pub async fn queue(&self) -> Vec<String> {
        match ractor::call!(self.supervisor(), SupervisorMsg::Queue) {
            Ok(names) => names,
            Err(err) => panic!("the supervisor does not answer: {err}"),
        }
    }

    /// The eviction actor's counters.
    ///
    /// # Panics
    /// If the eviction actor does not answer.
    pub async fn eviction_stats(&self) -> EvictionStats {
        match ractor::call!(self.system().evictor, EvictionMsg::Stats) {
            Ok(stats) => stats,
            Err(err) => panic!("the eviction actor does not answer: {err}"),
        }
    }

    /// Waits until the NodeMaintenance `name` says `phase`; false once `within` has passed.
    pub async fn wait_phase(&self, name: &str, phase: Phase, within: Duration) -> bool {
        eventually(within, || self.cluster.status(name).phase == Some(phase)).await
    }

    /// Waits until the NodeMaintenance `name` says `Succeeded`; false once `within` has passed.
    pub async fn wait_succeeded(&self, name: &str, within: Duration) -> bool {
        self.wait_phase(name, Phase::Succeeded, within).await
    }

    /// Waits until the NodeMaintenance `name` says `Failed`; false once `within` has passed.
    pub async fn wait_failed(&self, name: &str, within: Duration) -> bool {
        self.wait_phase(name, Phase::Failed, within).await
    }

    /// Waits until the `lastError` of the NodeMaintenance `name` contains `words`; false once
    /// `within` has passed.
    pub async fn wait_error(&self, name: &str, words: &str, within: Duration) -> bool {
        eventually(within, || {
            self.cluster
                .status(name)
                .last_error
                .is_some_and(|e| e.contains(words))
        })
        .await
    }

    /// Waits until the number of calls starting with `prefix` the fake cluster has seen (see
    /// [`FakeCluster::count_calls`]) passes `test`, e.g. `|n| n >= 2`; false once `within` has
    /// passed.
    pub async fn wait_calls(
        &self,
        prefix: &str,
        test: impl Fn(usize) -> bool,
        within: Duration,
    ) -> bool {
        eventually(within, || test(self.cluster.count_calls(prefix))).await
    }

    /// Waits until the NodeMaintenance `name` is gone from the cluster (undo finished and
    /// finalizer released); false once `within` has passed.
    pub async fn wait_gone(&self, name: &str, within: Duration) -> bool {
        eventually(within, || self.cluster.maintenance(name).is_none()).await
    }

    /// Stops the feeder and every actor, and waits for them.
    pub async fn stop(mut self) {
        self.feeder.abort();
        if let Some(system) = self.system.take() {
            system.shutdown().await;
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.feeder.abort();
        if let Some(system) = self.system.take() {
            system.supervisor.stop(None);
            system.evictor.stop(None);
        }
    }
}
