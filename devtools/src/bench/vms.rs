//! The VM scenario (`nmo bench --scenario vm`): drains of nodes running KubeVirt VMs, each of
//! which must live-migrate before its node can be drained, next to ordinary pods behind
//! `maxUnavailable: 1` budgets. KubeVirt is `nmo_sim::emulation::kubevirt` (its virt-api
//! webhook on `pods/eviction`, which the simulator calls, and its migration controller, with
//! KubeVirt's default limits of 5 migrations at once and 2 out of one node).
//!
//! It prints the time each node took against the migration floor (the migrations its VMs
//! need, in rounds the limits allow, each a target pod start-up plus the migration time), the
//! eviction requests per VM, and the refused evictions per evicted pod of the ordinary pods,
//! whose budgets still pace their evictions.

use std::collections::HashSet;
use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::error::BenchError;
use super::figures::{Target, percentile, target};
use super::process::OperatorProcess;
use super::report;
use super::run::{OPERATOR_USER, wait_watching};
use super::scenario::BenchScenario;
use crate::demo::maintenance;
use crate::demo::tracker::{self, Tracker};
use nmo_sim::emulation::kubevirt::{self, KubeVirt, MigrationOptions};
use nmo_sim::emulation::pods::PodWatch;
use nmo_sim::{ClientOptions, SimConfig, Simulator};

const OPERATOR_TOKEN: &str = "bench-operator-token";
const DRIVER_TOKEN: &str = "bench-driver-token";
/// The namespace of the VMs.
const VMS: &str = "vms";

/// One VM scenario.
#[derive(Debug, Clone, Serialize)]
pub struct VmScenario {
    /// Its name.
    pub name: String,
    /// The cluster's ordinary part: nodes, ordinary pods per node under budgets, nodes in
    /// maintenance at once, the kubelet's pace.
    pub base: BenchScenario,
    /// VMs per node.
    pub vms_per_node: usize,
    /// How long one live migration takes once its target pod runs.
    pub migration_time: Duration,
    /// Migrations at once, cluster wide.
    pub parallel: usize,
    /// Migrations at once out of one node.
    pub per_node: usize,
}

impl VmScenario {
    /// The scenario of this name, if there is one.
    pub fn named(name: &str) -> Option<VmScenario> {
        (name == "vm").then(vm)
    }

    /// The fewest seconds the drains can take: the VMs of the nodes drained at once migrate
    /// in rounds, at most `per_node` out of one node and `parallel` in all at a time, each
    /// round a target pod's start-up and a migration.
    pub fn migration_floor(&self) -> Duration {
        let per_node_rounds = self.vms_per_node.div_ceil(self.per_node.max(1));
        let all = self.vms_per_node * self.base.maintenance;
        let cluster_rounds = all.div_ceil(self.parallel.max(1));
        let rounds = per_node_rounds.max(cluster_rounds);
        let round = self.base.startup() + self.migration_time;
        round * u32::try_from(rounds).unwrap_or(u32::MAX)
    }
}

/// vm: 20 nodes x 5 VMs and 10 ordinary pods (5 spread over the nodes by 4 ReplicaSets with
/// `maxUnavailable: 1` budgets; a DaemonSet pod, a mirror pod, an emptyDir pod, an unmanaged
/// pod and a finished pod), 4 nodes at once, 10 s migrations, a real-time kubelet.
pub fn vm() -> VmScenario {
    VmScenario {
        name: "vm".into(),
        base: BenchScenario {
            name: "vm".into(),
            title: "20 nodes x (5 VMs + 10 pods), 4 at once, 10 s migrations, real-time kubelet"
                .into(),
            nodes: 20,
            pods_per_node: 10,
            maintenance: 4,
            replicasets: Some(4),
            pdb_max_unavailable: Some(1),
            time_scale: 1.0,
            eviction_rate: None,
            timeout: Duration::from_secs(600),
            traps: None,
        },
        vms_per_node: 5,
        migration_time: Duration::from_secs(10),
        parallel: 5,
        per_node: 2,
    }
}

/// What a VM scenario measured.
#[derive(Debug, Clone, Serialize)]
pub struct VmResult {
    /// The scenario.
    pub scenario: String,
    /// Until every maintenance Succeeded.
    pub wall_s: f64,
    /// Each node's drain, from its NodeMaintenance's creation to Succeeded: p50 and p99.
    pub node_p50_s: f64,
    /// See `node_p50_s`.
    pub node_p99_s: f64,
    /// The migration floor of one node (see [`VmScenario::migration_floor`]).
    pub floor_s: f64,
    /// VMs that had to move, and the migrations KubeVirt made.
    pub vms_moved: usize,
    /// See `vms_moved`.
    pub migrations: u32,
    /// Eviction requests nmo made per VM that had to move.
    pub requests_per_vm: f64,
    /// The ordinary pods evicted, and the evictions of them refused (429).
    pub ordinary_evicted: u64,
    /// See `ordinary_evicted`.
    pub ordinary_refused: u64,
    /// Launcher pods deleted while they ran (must be 0).
    pub launchers_deleted_running: usize,
}

impl VmResult {
    /// Refused evictions per evicted ordinary pod.
    pub fn refused_per_pod(&self) -> f64 {
        self.ordinary_refused as f64 / self.ordinary_evicted.max(1) as f64
    }

    /// The figures held to their targets: every VM migrates exactly once, no launcher pod is
    /// deleted while it runs, the last node is drained within 1.5 x the migration floor, and
    /// the ordinary pods keep the budget-driven pacing (at most 0.5 refused evictions per
    /// evicted pod, as scenario c without interceptors).
    pub fn targets(&self) -> Vec<Target> {
        let moved = u32::try_from(self.vms_moved).unwrap_or(u32::MAX);
        let within = self.floor_s * 1.5;
        vec![
            target(
                "migrations",
                format!("= {moved} (one per VM)"),
                self.migrations.to_string(),
                self.migrations == moved,
            ),
            target(
                "launcher pods deleted while running",
                "= 0".into(),
                self.launchers_deleted_running.to_string(),
                self.launchers_deleted_running == 0,
            ),
            target(
                "node drained p99",
                format!("<= {within:.1} s (1.5 x floor)"),
                format!("{:.1} s", self.node_p99_s),
                self.node_p99_s <= within,
            ),
            target(
                "ordinary pods: refused per evicted",
                "<= 0.50".into(),
                format!("{:.2}", self.refused_per_pod()),
                self.refused_per_pod() <= 0.5,
            ),
        ]
    }
}

impl fmt::Display for VmResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "scenario  wall     node p50  node p99  migration floor  VMs moved  migrations  evictions per VM  ordinary refused/evicted  launchers deleted running"
        )?;
        write!(
            f,
            "{:<8}  {:>6.1} s {:>7.1} s {:>7.1} s {:>14.1} s {:>10} {:>11} {:>17.2} {:>14.2} ({}/{}) {:>26}",
            self.scenario,
            self.wall_s,
            self.node_p50_s,
            self.node_p99_s,
            self.floor_s,
            self.vms_moved,
            self.migrations,
            self.requests_per_vm,
            self.refused_per_pod(),
            self.ordinary_refused,
            self.ordinary_evicted,
            self.launchers_deleted_running
        )
    }
}

/// Runs `scenario` with the operator binary `nmo`; scratch files go to `dir`.
pub async fn run(scenario: &VmScenario, nmo: &Path, dir: &Path) -> Result<VmResult, BenchError> {
    let base = &scenario.base;
    let mut config = SimConfig::default()
        .scenario(base.scenario())
        .crd(&nmo::crd::definition())?
        .token(OPERATOR_TOKEN, OPERATOR_USER)
        .token(DRIVER_TOKEN, "bench-driver");
    config.timing = base.timing();
    let sim = Simulator::start(config).await?;
    let kubeconfig = dir.join(format!("{}.kubeconfig", scenario.name));
    sim.write_kubeconfig_with_token(&kubeconfig, OPERATOR_TOKEN)?;
    let log = dir.join(format!("{}.nmo.log", scenario.name));
    let mut operator = OperatorProcess::spawn(nmo, &kubeconfig, None, None, &log)?;
    wait_watching(&sim, &mut operator).await?;
    let client = sim.kube_client_with(&ClientOptions {
        user_agent: "nmo-bench-driver".into(),
        token: Some(DRIVER_TOKEN.into()),
        retry: true,
    })?;
    let layout = base.scenario();
    let nodes: Vec<String> = (0..base.nodes).map(|i| layout.node_name(i)).collect();
    let maintained = base.maintained_nodes();
    let (kubevirt, launchers) = set_up_vms(scenario, &client, &nodes).await?;

    let (tracker, watch_task) = Tracker::start(client.clone());
    let started = Instant::now();
    let names = maintenance::create_all(&client, &tracker, &maintained, "benchmark").await?;
    let finished = tracker
        .wait_until(base.timeout, |state| tracker::all_succeeded(state, &names))
        .await;
    let wall = started.elapsed();
    let state = tracker.snapshot();
    watch_task.abort();
    operator.stop();
    let log = kubevirt.log();
    kubevirt.stop().await;
    if !finished {
        return Err(crate::demo::DemoError::Timeout {
            what: format!("every maintenance of scenario {} to succeed", scenario.name),
            after: base.timeout,
        }
        .into());
    }
    let drains = tracker::drain_times(&state, &names);
    let (ordinary_evicted, ordinary_refused) = ordinary_evictions(&sim);
    let moved = maintained.len() * scenario.vms_per_node;
    let requests: u32 = log.requests.values().sum();
    let result = VmResult {
        scenario: scenario.name.clone(),
        wall_s: wall.as_secs_f64(),
        node_p50_s: percentile(&drains, 0.5),
        node_p99_s: percentile(&drains, 0.99),
        floor_s: scenario.migration_floor().as_secs_f64(),
        vms_moved: moved,
        migrations: log.migrations.values().sum(),
        requests_per_vm: f64::from(requests) / moved.max(1) as f64,
        ordinary_evicted,
        ordinary_refused,
        launchers_deleted_running: launchers.deleted_while_running(&HashSet::new()).len(),
    };
    sim.shutdown().await;
    Ok(result)
}

/// Creates the VMs on every node and starts the emulated KubeVirt, migrating to any node.
async fn set_up_vms(
    scenario: &VmScenario,
    client: &kube::Client,
    nodes: &[String],
) -> Result<(KubeVirt, PodWatch), BenchError> {
    kubevirt::install_vmi_crd(client).await?;
    let namespace: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": VMS}}))?;
    kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(&kube::api::PostParams::default(), &namespace)
        .await
        .map_err(|source| BenchError::Setup {
            what: "the VMs' namespace".into(),
            source,
        })?;
    for (n, node) in nodes.iter().enumerate() {
        for i in 0..scenario.vms_per_node {
            let name = format!("vm-{n}-{i}");
            kubevirt::create_vm(client, VMS, &name, node, "LiveMigrate", true).await?;
        }
    }
    let options = MigrationOptions {
        targets: nodes.to_vec(),
        migration_time: scenario.migration_time,
        parallel: scenario.parallel,
        per_node: scenario.per_node,
    };
    let kubevirt = KubeVirt::start(client, VMS, options).await?;
    let launchers = PodWatch::start(client, VMS, "kubevirt.io=virt-launcher");
    // Every VM runs before the drains start (a launcher pod still Pending would be deleted
    // by its eviction, as the Eviction API does with every pod not yet running).
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), VMS);
    let all = nodes.len() * scenario.vms_per_node;
    for _ in 0..600 {
        let running = pods
            .list(&kube::api::ListParams::default())
            .await
            .map(|list| {
                list.items
                    .iter()
                    .filter(|p| {
                        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    })
                    .count()
            })
            .unwrap_or(0);
        if running >= all {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok((kubevirt, launchers))
}

/// The ordinary pods (outside the VMs' namespace) evicted (201) and refused (429).
fn ordinary_evictions(sim: &nmo_sim::SimHandle) -> (u64, u64) {
    let mut evicted = 0;
    let mut refused = 0;
    for ((namespace, _, code), n) in sim.accounting().evictions() {
        if namespace == VMS {
            continue;
        }
        match code {
            201 => evicted += n,
            429 => refused += n,
            _ => {}
        }
    }
    (evicted, refused)
}

/// Runs the VM scenario and prints its figures.
pub async fn run_and_print(
    scenario: &VmScenario,
    json: bool,
    nmo: &Path,
    dir: &Path,
    out: &mut (dyn std::io::Write + Send),
) -> Result<VmResult, BenchError> {
    if !json {
        writeln!(out, "machine: {}", report::machine())?;
        writeln!(
            out,
            "running {}: {} ...",
            scenario.name, scenario.base.title
        )?;
        out.flush()?;
    }
    let result = run(scenario, nmo, dir).await?;
    if json {
        writeln!(out, "{}", serde_json::to_string(&result)?)?;
    } else {
        writeln!(out, "{result}")?;
        let rows: Vec<(String, Target)> = result
            .targets()
            .into_iter()
            .map(|t| (result.scenario.clone(), t))
            .collect();
        out.write_all(report::targets_table(&rows).as_bytes())?;
    }
    out.flush()?;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_is_the_rounds_kubevirts_limits_allow_each_a_startup_and_a_migration() {
        // 4 nodes x 5 VMs = 20 migrations, 5 at once: 4 rounds (3 per node at 2 a node),
        // each 2 s of target pod start-up and 10 s of migration.
        assert_eq!(vm().migration_floor(), Duration::from_secs(48));
        let one_node = VmScenario {
            base: BenchScenario {
                maintenance: 1,
                ..vm().base
            },
            ..vm()
        };
        assert_eq!(one_node.migration_floor(), Duration::from_secs(36));
    }

    #[test]
    fn a_second_migration_or_a_slow_drain_misses_its_target() {
        let result = VmResult {
            scenario: "vm".into(),
            wall_s: 60.0,
            node_p50_s: 40.0,
            node_p99_s: 60.0,
            floor_s: 48.0,
            vms_moved: 20,
            migrations: 20,
            requests_per_vm: 4.0,
            ordinary_evicted: 28,
            ordinary_refused: 0,
            launchers_deleted_running: 0,
        };
        assert!(result.targets().iter().all(|t| t.met));
        let twice = VmResult {
            migrations: 21,
            node_p99_s: 80.0,
            ..result
        };
        let missed: Vec<String> = twice
            .targets()
            .into_iter()
            .filter(|t| !t.met)
            .map(|t| t.what)
            .collect();
        assert_eq!(missed, ["migrations", "node drained p99"]);
    }
}
