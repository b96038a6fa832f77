//! The soak's size and faults, and how it names what it creates.

use std::time::Duration;

use nmo_sim::Scenario;

/// The soak's size and faults.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SoakConfig {
    /// `soak` or `soak-ci`.
    pub name: String,
    /// Nodes in the cluster (one NodeMaintenance per node at most).
    pub nodes: usize,
    /// Pods per node (with a DaemonSet pod, a mirror pod and PDB-covered ReplicaSet pods).
    pub pods_per_node: usize,
    /// Waves of NodeMaintenances.
    pub waves: usize,
    /// NodeMaintenances per wave.
    pub per_wave: usize,
    /// Leaders killed (one per wave, from the second wave on).
    pub kills: usize,
    /// Fraction of the replicas' requests answered with an error (500, 409, 429 in equal
    /// parts).
    pub error_rate: f64,
    /// Fraction of the replicas' requests answered late.
    pub late_rate: f64,
    /// How late.
    #[serde(skip)]
    pub late_by: Duration,
    /// How long the writes a leader sends just before it is killed are held by the network
    /// (delivered whatever becomes of it): longer than a handover takes.
    #[serde(skip)]
    pub handover_late_by: Duration,
    /// For how long before it is killed a leader's writes are held.
    #[serde(skip)]
    pub handover_hold: Duration,
    /// The replicas' `--api-call-timeout`.
    #[serde(skip)]
    pub call_timeout: Duration,
    /// Watches are closed by the server after this long.
    #[serde(skip)]
    pub watch_drop_after: Duration,
    /// How long a wave may take before the next starts anyway.
    #[serde(skip)]
    pub wave_timeout: Duration,
    /// How long the end state may take to converge.
    #[serde(skip)]
    pub converge_timeout: Duration,
    /// API server restarts after the waves, each down this long (connections dropped, 503
    /// meanwhile, then 410 on every resumed watch). Shorter than the replicas' leader renew
    /// deadline (6 s), the leader keeps leading; longer, it loses the lease and exits, and the
    /// recovery includes a new election (a standby waits out the lease's 8 s first).
    #[serde(skip)]
    pub outages: Vec<Duration>,
    /// NodeMaintenances created at each return of the API server.
    pub per_restart: usize,
    /// Maintenances whose node lease another operator takes over (after the restarts).
    pub takeovers: usize,
    /// How long after the return each of them may take to be reconciled before it counts as
    /// missed (and how long a taken-over maintenance may take to give up).
    #[serde(skip)]
    pub recovery_timeout: Duration,
}

impl SoakConfig {
    /// The full soak: 100 NodeMaintenances in 4 waves, 3 kills.
    pub fn full() -> Self {
        SoakConfig {
            name: "soak".into(),
            nodes: 100,
            pods_per_node: 6,
            waves: 4,
            per_wave: 25,
            kills: 3,
            error_rate: 0.10,
            late_rate: 0.02,
            late_by: Duration::from_secs(3),
            // The leader lease lasts 8 s (see `operator_args`).
            handover_late_by: Duration::from_secs(12),
            handover_hold: Duration::from_millis(1500),
            call_timeout: Duration::from_secs(2),
            watch_drop_after: Duration::from_secs(15),
            wave_timeout: Duration::from_secs(120),
            converge_timeout: Duration::from_secs(180),
            outages: vec![
                Duration::from_secs(3),
                Duration::from_secs(5),
                Duration::from_secs(10),
            ],
            per_restart: 5,
            takeovers: 5,
            recovery_timeout: Duration::from_secs(30),
        }
    }

    /// The CI-sized soak: 20 NodeMaintenances in 2 waves, 1 kill.
    pub fn ci() -> Self {
        SoakConfig {
            name: "soak-ci".into(),
            nodes: 20,
            pods_per_node: 4,
            waves: 2,
            per_wave: 10,
            kills: 1,
            wave_timeout: Duration::from_secs(45),
            converge_timeout: Duration::from_secs(60),
            outages: vec![Duration::from_secs(5)],
            per_restart: 3,
            takeovers: 2,
            ..SoakConfig::full()
        }
    }

    /// The named soak (`soak`, `soak-ci`), if it is one.
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "soak" => Some(Self::full()),
            "soak-ci" => Some(Self::ci()),
            _ => None,
        }
    }

    pub(super) fn operator_args(&self) -> Vec<String> {
        [
            "--leader-elect",
            "--leader-elect-lease-duration",
            "8",
            "--leader-elect-renew-deadline",
            "6",
            "--leader-elect-retry-period",
            "1",
            "--api-call-timeout",
        ]
        .iter()
        .map(|s| (*s).to_string())
        .chain([format!("{}s", self.call_timeout.as_secs_f64())])
        .collect()
    }

    pub(super) fn waves(&self) -> Vec<Vec<String>> {
        let scenario = self.scenario();
        (0..self.waves)
            .map(|wave| {
                (0..self.per_wave)
                    .map(|i| scenario.node_name((wave * self.per_wave + i) % self.nodes))
                    .collect()
            })
            .collect()
    }

    pub(super) fn scenario(&self) -> Scenario {
        Scenario::new(self.nodes, self.pods_per_node)
    }
}

/// The NodeMaintenance the soak creates for `node`.
pub(super) fn nm_name(node: &str) -> String {
    format!("nm-{node}")
}

/// Creates the soak's NodeMaintenance for `node`. A failure is only logged: the driver's client
/// retries, and a name still being deleted from an earlier round is simply not created again.
pub(super) async fn create_maintenance(
    api: &kube::Api<nmo::crd::NodeMaintenance>,
    node: &str,
    reason: String,
) {
    let nm = nmo::crd::NodeMaintenance::new(
        &nm_name(node),
        nmo::crd::NodeMaintenanceSpec {
            node_name: node.to_string(),
            reason: Some(reason),
            ..nmo::crd::NodeMaintenanceSpec::default()
        },
    );
    if let Err(error) = api.create(&kube::api::PostParams::default(), &nm).await {
        tracing::warn!(%error, node, "cannot create NodeMaintenance");
    }
}
