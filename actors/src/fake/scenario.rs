//! A test's starting point in one expression: the cluster as the test prepared it, the
//! configuration it changes, and the NodeMaintenances created once the actors run, e.g.
//! `Scenario::on(&cluster).config(|c| c.eviction_burst = 1).maintenance("nm1", "n1").start()`.
//! A test then says only what differs from the defaults.

use super::cluster::FakeCluster;
use super::fixtures::t0;
use super::harness::{Harness, paused_config};
use crate::config::Config;
use crate::model::Maintenance;

/// The actors to start against a fake cluster, and what to create once they run.
pub struct Scenario {
    cluster: FakeCluster,
    config: Config,
    create: Vec<Maintenance>,
}

impl Scenario {
    /// The actors on `cluster` (as the test prepared it) with [`paused_config`], creating
    /// nothing.
    pub fn on(cluster: &FakeCluster) -> Self {
        Scenario {
            cluster: cluster.clone(),
            config: paused_config(),
            create: Vec::new(),
        }
    }

    /// With the configuration changed by `tweak`.
    #[must_use]
    pub fn config(mut self, tweak: impl FnOnce(&mut Config)) -> Self {
        tweak(&mut self.config);
        self
    }

    /// Creating NodeMaintenance `name` for node `node` (created at [`t0`], no status, no
    /// finalizer) once the actors run, after those asked for before.
    #[must_use]
    pub fn maintenance(self, name: &str, node: &str) -> Self {
        self.create(Maintenance::test(name).on(node).created_at(t0()))
    }

    /// Creating `nm1` for node `n1`, the maintenance most tests are about (see
    /// [`Scenario::maintenance`]).
    #[must_use]
    pub fn nm1(self) -> Self {
        self.maintenance("nm1", "n1")
    }

    /// Creating `nm` as given once the actors run, after those asked for before.
    #[must_use]
    pub fn create(mut self, nm: Maintenance) -> Self {
        self.create.push(nm);
        self
    }

    /// Starts the actors, then creates the NodeMaintenances in the order asked.
    ///
    /// # Panics
    /// If the actors cannot start (a test cannot go on then).
    pub async fn start(self) -> Harness {
        let Scenario {
            cluster,
            config,
            create,
        } = self;
        let harness = Harness::started(&cluster, config).await;
        for nm in create {
            cluster.create(nm);
        }
        harness
    }
}
