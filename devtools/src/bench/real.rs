//! One scenario on a real API server (`nmo bench --backend real`): etcd, kube-apiserver,
//! kube-controller-manager and kube-scheduler from `KUBEBUILDER_ASSETS` (nmo-envtest), the
//! scenario seeded through the API (its ReplicaSets, DaemonSets and budgets made by the real
//! controllers), nmo-sim's kubelet stand-in playing the kubelet at the scenario's speed, and
//! `nmo run` in a child process as its ServiceAccount under deploy/base's RBAC (a kubeconfig
//! of its own). nmo's requests are counted from the API server's audit log (a policy that logs
//! nmo's user only), as the simulator would count them: by verb and resource, watches when
//! they open, start-up included. Each scenario also runs its floor (the least work any operator
//! must do, [`super::floor`]) on a control plane of its own, and both runs' cost to
//! kube-apiserver and etcd is read ([`super::server_cost`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nmo_envtest::audit::Request;
use nmo_envtest::{
    AuditLog, Component, ControlPlane, Identity, NodeTemplate, Options, yaml_files_in,
};
use nmo_sim::kubelet::remote::{NodeSet, RemoteKubelet};

use super::error::BenchError;
use super::figures::percentile;
use super::floor;
use super::process::{self, OperatorProcess};
use super::real_figures::{self, FloorFigures, RealFigures, RequestOverhead};
use super::result::ScenarioResult;
use super::scenario::BenchScenario;
use super::server_cost::{self, ServerCost};
use crate::demo::requests::RequestTotals;
use crate::demo::tracker::{self, Tracker};
use crate::demo::{DemoError, maintenance};

/// nmo's ServiceAccount in deploy/base (namespace, name), bound to deploy/base's rules.
const OPERATOR_ACCOUNT: (&str, &str) = ("nmo-system", "nmo");
/// How long `nmo run` may take to start watching.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the scenario may take to settle (pods running, owners and budgets up to date), at
/// the least; a larger one gets [`SEED_TIME_PER_POD`] for each pod.
const SEED_TIMEOUT: Duration = Duration::from_secs(600);
/// The seeding time a pod adds (10,000 pods: 1,500 s on 2 shared cores).
const SEED_TIME_PER_POD: Duration = Duration::from_millis(150);
/// The controller manager's and the scheduler's client rate (requests per second, and the
/// burst twice that). At their defaults (20 and 50 per second) each pod the seeding creates,
/// binds and announces by events, and each replacement the ReplicaSet controller makes during
/// a drain, waits its turn: the benchmark measures the operator and the floor, not the
/// controllers' client-side limits. Both runs get the same.
const CONTROLLERS_QPS: u32 = 500;

/// How long seeding `pods` pods may take.
fn seed_timeout(pods: usize) -> Duration {
    SEED_TIMEOUT.max(SEED_TIME_PER_POD.saturating_mul(u32::try_from(pods).unwrap_or(u32::MAX)))
}

/// The controllers' client rate flags ([`CONTROLLERS_QPS`]).
fn controller_rate_args() -> Vec<(Component, String)> {
    [Component::ControllerManager, Component::Scheduler]
        .into_iter()
        .flat_map(|component| {
            [
                (component, format!("--kube-api-qps={CONTROLLERS_QPS}")),
                (
                    component,
                    format!("--kube-api-burst={}", 2 * CONTROLLERS_QPS),
                ),
            ]
        })
        .collect()
}
/// Time after the last Succeeded for requests still in flight to be logged.
const SETTLE: Duration = Duration::from_millis(500);

/// deploy/base: the CRD and the RBAC the operator runs under.
fn deploy_base() -> PathBuf {
    // This crate lives in devtools/; deploy/ is the workspace's, one level up.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/base")
}

fn operator_identity() -> Identity {
    Identity::service_account(OPERATOR_ACCOUNT.0, OPERATOR_ACCOUNT.1)
}

/// A fresh control plane, with the audit log that counts nmo's user's requests.
struct Plane {
    control_plane: ControlPlane,
    audit: AuditLog,
}

/// Starts a control plane for run `run` (`floor` or `nmo`) of `scenario`.
async fn start_plane(scenario: &BenchScenario, dir: &Path, run: &str) -> Result<Plane, BenchError> {
    let user = operator_identity().name().to_string();
    let audit_dir = dir.join(format!("{}-{run}-audit", scenario.name));
    std::fs::create_dir_all(&audit_dir)?;
    let audit = AuditLog::for_users(&audit_dir, &[&user])?;
    let mut extra_args = audit.apiserver_args();
    extra_args.extend(controller_rate_args());
    let options = Options {
        extra_args,
        ..Options::default()
    };
    // Starting blocks for seconds: off the runtime's workers.
    let control_plane = tokio::task::spawn_blocking(move || ControlPlane::start(options))
        .await
        .map_err(|join| BenchError::Real(join.to_string()))??;
    Ok(Plane {
        control_plane,
        audit,
    })
}

impl Plane {
    /// Stops it: that waits for the processes to exit, off the runtime's workers.
    async fn stop(self) {
        let control_plane = self.control_plane;
        let _ = tokio::task::spawn_blocking(move || drop(control_plane)).await;
    }

    /// Installs deploy/base, registers the scenario's nodes, starts the kubelet stand-in and
    /// seeds the workload; returns the admin's client and the kubelet.
    async fn seed(
        &self,
        scenario: &BenchScenario,
    ) -> Result<(kube::Client, RemoteKubelet), BenchError> {
        let control_plane = &self.control_plane;
        let deploy = yaml_files_in(&deploy_base())?;
        control_plane.install_crds(&deploy).await?;
        control_plane.apply_rbac(&deploy).await?;
        let admin = control_plane.admin_client()?;
        let seeded = scenario.scenario();
        for node in seeded.node_names() {
            control_plane.register(NodeTemplate::new(node)).await?;
        }
        let kubelet = RemoteKubelet::spawn(admin.clone(), scenario.timing(), NodeSet::all());
        let pods = scenario.nodes * scenario.pods_per_node;
        nmo_sim::api_seed::seed(&admin, &seeded, seed_timeout(pods)).await?;
        Ok((admin, kubelet))
    }
}

/// Runs one scenario on the real API server, with the operator binary `nmo`, and its floor;
/// scratch files (the audit logs, the operator's log) go to `dir`.
///
/// The floor and nmo's run each get a fresh control plane of their own, started with the same
/// options, given the same nodes and seeded with the same workload by the same steps, with
/// the same kubelet stand-in: both begin from the same cluster state (objects, pods per node,
/// etcd's history), so `wall / floor` compares the work alone. Reusing one control plane would
/// not give that: the floor's evictions leave replacement pods, new pod names and a longer
/// etcd history behind. The floor runs first, as nmo's ServiceAccount, so that flow control
/// classifies its requests as it does nmo's.
pub async fn run(
    scenario: &BenchScenario,
    nmo: &Path,
    dir: &Path,
) -> Result<ScenarioResult, BenchError> {
    if scenario.traps.is_some() {
        return Err(BenchError::Real(format!(
            "scenario {} sets its traps up through the simulator: it runs there only",
            scenario.name
        )));
    }
    let plane = start_plane(scenario, dir, "floor").await?;
    let floor = measure_floor(&plane, scenario).await;
    plane.stop().await;
    let floor = floor?;
    let plane = start_plane(scenario, dir, "nmo").await?;
    let outcome = measure(&plane, scenario, nmo, dir).await;
    plane.stop().await;
    let (mut result, cost) = outcome?;
    result.real = Some(RealFigures {
        wall_over_floor: real_figures::ratio(result.wall_s, floor.wall_s),
        floor,
        cost,
        overhead: RequestOverhead::of(&result.requests, result.maintenance),
    });
    Ok(result)
}

/// The floor of `scenario` on `plane` (see [`floor`]), with its cost to the control plane.
async fn measure_floor(
    plane: &Plane,
    scenario: &BenchScenario,
) -> Result<FloorFigures, BenchError> {
    let (admin, kubelet) = plane.seed(scenario).await?;
    let client = plane.control_plane.client_as(&operator_identity())?;
    let prepared = floor::prepare(&client, &scenario.maintained_nodes()).await?;
    let before = server_cost::snapshot(&plane.control_plane, &admin).await?;
    let run = floor::drain(prepared, &client, scenario.timeout).await;
    tokio::time::sleep(SETTLE).await;
    let after = server_cost::snapshot(&plane.control_plane, &admin).await;
    kubelet.stop();
    let run = run?;
    let requests = RequestTotals::from_audit(&plane.audit.requests()?);
    Ok(FloorFigures {
        wall_s: run.wall.as_secs_f64(),
        p50_s: percentile(&run.drained, 0.50),
        p99_s: percentile(&run.drained, 0.99),
        removed: run.removed,
        requests: requests.total,
        too_many_requests: requests.too_many_requests,
        cost: ServerCost::between(&before, &after?),
    })
}

/// nmo's run of `scenario` on `plane`, with its cost to the control plane.
async fn measure(
    plane: &Plane,
    scenario: &BenchScenario,
    nmo: &Path,
    dir: &Path,
) -> Result<(ScenarioResult, ServerCost), BenchError> {
    let (control_plane, audit) = (&plane.control_plane, &plane.audit);
    let (admin, kubelet) = plane.seed(scenario).await?;

    let kubeconfig = control_plane.kubeconfig_path(&operator_identity())?;
    let log = dir.join(format!("{}.nmo.log", scenario.name));
    // Its metrics are served so that the connections its client opened can be read at the
    // end: the audit log knows requests, not connections.
    let metrics = process::free_local_addr();
    let mut operator =
        OperatorProcess::spawn(nmo, &kubeconfig, scenario.eviction_rate, metrics, &log)?;
    wait_watching(audit, &mut operator).await?;

    let (tracker, watch_task) = Tracker::start(admin.clone());
    let before = operator.usage()?;
    let server_before = server_cost::snapshot(control_plane, &admin).await?;
    let nodes = scenario.maintained_nodes();
    let started = Instant::now();
    let names = maintenance::create_all(&admin, &tracker, &nodes, "benchmark").await?;
    let finished = tracker
        .wait_until(scenario.timeout, |state| {
            tracker::all_succeeded(state, &names)
        })
        .await;
    let wall = started.elapsed();
    tokio::time::sleep(SETTLE).await;
    let after = operator.usage()?;
    let server_after = server_cost::snapshot(control_plane, &admin).await?;
    let mut requests = RequestTotals::from_audit(&audit.requests()?);
    if let Some(addr) = metrics {
        // Over TLS the API server and nmo's client agree on HTTP/2 by ALPN: a handful of
        // connections. A count near the number of watches would mean HTTP/1.1.
        let opened = process::scrape_counter(addr, CONNECTIONS_OPENED).await;
        requests.connections = opened.map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX));
    }
    let state = tracker.snapshot();
    watch_task.abort();
    kubelet.stop();
    if operator.exited() {
        return Err(BenchError::OperatorExited(
            operator.log().display().to_string(),
        ));
    }
    operator.stop();
    if !finished {
        return Err(DemoError::Timeout {
            what: format!(
                "every maintenance of scenario {} to succeed on the real API server",
                scenario.name
            ),
            after: scenario.timeout,
        }
        .into());
    }
    let drained = tracker::drain_times(&state, &names);
    let counted = tracker::pods_to_evict(&state, &names);
    let removed = requests.pods_removed();
    let mut result = ScenarioResult::new(
        scenario,
        wall,
        &drained,
        counted.max(removed),
        requests,
        after,
        after.cpu.saturating_sub(before.cpu),
    );
    result.backend = "real".into();
    Ok((result, ServerCost::between(&server_before, &server_after)))
}

/// nmo's counter of the connections its kube client opened (`observability::api_metrics`); an
/// older nmo binary (`--nmo`) has none, and 0 connections are reported.
const CONNECTIONS_OPENED: &str = "nmo_kube_api_connections_opened_total";

/// Waits until `nmo run` watches NodeMaintenances (its start-up is over), as the audit log
/// shows it.
async fn wait_watching(audit: &AuditLog, operator: &mut OperatorProcess) -> Result<(), BenchError> {
    operator
        .wait_watching(START_TIMEOUT, Duration::from_millis(100), || {
            Ok(audit
                .requests()?
                .iter()
                .any(|r| r.verb == "watch" && r.resource == "nodemaintenances"))
        })
        .await
}

impl RequestTotals {
    /// The totals of audited requests (one identity's, as the audit policy chose).
    pub fn from_audit(requests: &[Request]) -> RequestTotals {
        let mut totals = RequestTotals::default();
        for request in requests {
            totals.total += 1;
            *totals.by_verb.entry(request.verb.clone()).or_insert(0) += 1;
            *totals
                .by_request
                .entry(format!("{} {}", request.verb, request.resource_path()))
                .or_insert(0) += 1;
            if request.resource == "pods" && request.subresource == "eviction" {
                totals.evictions += 1;
                *totals.eviction_responses.entry(request.code).or_insert(0) += 1;
            }
            if request.code == 429 {
                totals.too_many_requests += 1;
            }
        }
        totals
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(verb: &str, resource: &str, subresource: &str, code: u16) -> Request {
        Request {
            user: "u".into(),
            user_agent: String::new(),
            verb: verb.into(),
            group: String::new(),
            resource: resource.into(),
            subresource: subresource.into(),
            namespace: String::new(),
            code,
            uri: String::new(),
        }
    }

    #[test]
    fn audited_requests_add_up_like_the_simulator_s_accounting() {
        let totals = RequestTotals::from_audit(&[
            request("create", "pods", "eviction", 201),
            request("create", "pods", "eviction", 429),
            request("watch", "pods", "", 200),
            request("patch", "nodemaintenances", "status", 200),
        ]);
        assert_eq!(totals.total, 4);
        assert_eq!(totals.evictions, 2);
        assert_eq!(totals.eviction_responses[&201], 1);
        assert_eq!(totals.too_many_requests, 1);
        assert_eq!(totals.by_request["patch nodemaintenances/status"], 1);
        assert_eq!(totals.by_verb["create"], 2);
        assert_eq!(totals.other_than_evictions(), 2);
    }

    #[test]
    fn the_seeding_time_grows_with_the_pods_and_never_shrinks() {
        assert_eq!(seed_timeout(500), SEED_TIMEOUT);
        assert_eq!(seed_timeout(10_000), Duration::from_secs(1500));
    }

    #[test]
    fn both_controllers_get_the_same_client_rate() {
        let args = controller_rate_args();
        for component in [Component::ControllerManager, Component::Scheduler] {
            let theirs: Vec<&str> = args
                .iter()
                .filter(|(of, _)| *of == component)
                .map(|(_, arg)| arg.as_str())
                .collect();
            assert_eq!(theirs, ["--kube-api-qps=500", "--kube-api-burst=1000"]);
        }
    }
}
