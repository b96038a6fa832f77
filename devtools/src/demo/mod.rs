//! `nmo demo`: a simulated cluster with a realistic workload, nmo running against it over HTTP,
//! a set of nodes put into maintenance at once with live progress, a summary of what it took,
//! and the nodes restored at the end. The demo is a client of both the simulator and the
//! operator; neither knows it exists. The benchmarks reuse its pieces.

pub mod embedded;
pub mod error;
pub mod maintenance;
pub mod nodes;
pub mod options;
pub mod progress;
pub mod requests;
pub mod summary;
pub mod table;
pub mod tracker;

use std::future::Future;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

pub use error::DemoError;
use nmo_sim::{ClientOptions, Query, SimConfig, SimHandle, Simulator};
use nodes::NodeMarks;
pub use options::DemoOptions;
pub use progress::Display;
use requests::RequestTotals;
use summary::NodeRow;
use tracker::Tracker;

/// The User-Agent of the embedded operator, so the simulator counts its requests apart.
pub const OPERATOR_AGENT: &str = "nmo-demo-operator";
/// The User-Agent of the demo's own requests (creating and deleting NodeMaintenances).
pub const DEMO_AGENT: &str = "nmo-demo-driver";
/// How long restoring the nodes may take once the NodeMaintenances are deleted.
const RESTORE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the operator may take to start watching.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// What a demo run showed.
#[derive(Debug, Clone, Serialize)]
pub struct DemoReport {
    /// One row per maintenance.
    pub rows: Vec<NodeRow>,
    /// nmo's requests while draining (its start-up included).
    pub requests: RequestTotals,
    /// From the first create request until every maintenance Succeeded.
    pub drained_in: Duration,
    /// The maintained nodes after the NodeMaintenances were deleted.
    pub restored: Vec<NodeMarks>,
}

impl DemoReport {
    /// Every maintenance Succeeded.
    pub fn all_succeeded(&self) -> bool {
        !self.rows.is_empty() && self.rows.iter().all(NodeRow::succeeded)
    }

    /// Every maintained node is back to normal.
    pub fn all_restored(&self) -> bool {
        !self.restored.is_empty() && self.restored.iter().all(NodeMarks::restored)
    }
}

/// Runs the demo, writing its story to `out`. `keep_until` is awaited (when `--keep`) between
/// the summary and the restore, while the simulator and nmo keep serving.
pub async fn run(
    options: &DemoOptions,
    display: Display,
    out: &mut (dyn Write + Send),
    keep_until: impl Future<Output = ()>,
) -> Result<DemoReport, DemoError> {
    options.validate()?;
    let scenario = options.scenario();
    let mut config = SimConfig::default()
        .scenario(scenario.clone())
        .crd(&nmo::crd::definition())?;
    config.timing = options.timing();
    let sim = Simulator::start(config).await?;
    let outcome = drive(&sim, options, display, out, keep_until).await;
    sim.shutdown().await;
    outcome
}

fn client(sim: &SimHandle, agent: &str) -> Result<kube::Client, DemoError> {
    Ok(sim.kube_client_with(&ClientOptions {
        user_agent: agent.into(),
        ..ClientOptions::default()
    })?)
}

async fn drive(
    sim: &SimHandle,
    options: &DemoOptions,
    display: Display,
    out: &mut (dyn Write + Send),
    keep_until: impl Future<Output = ()>,
) -> Result<DemoReport, DemoError> {
    // Over 80 lines: the demo's steps in the order the user sees them (operator, maintenances,
    // progress, summary, restore), sharing the display and the tracker.
    let scenario = options.scenario();
    if let Some(report) = sim.scenario_report() {
        writeln!(
            out,
            "simulated cluster at {}: {} nodes, {} pods ({} ReplicaSets, {} PodDisruptionBudgets{}, \
             {} DaemonSet, mirror, emptyDir, unmanaged and finished pods on every node); kubelet \
             speed {}",
            sim.base_url(),
            report.nodes.len(),
            report.pods,
            report.replicasets.len(),
            report.pdbs.len(),
            if report.pdbs.is_empty() {
                String::new()
            } else {
                format!(" with maxUnavailable {}", options.pdb_max_unavailable)
            },
            report.daemonsets.len(),
            options.kubelet_speed,
        )?;
    }
    let operator = embedded::EmbeddedOperator::start(client(sim, OPERATOR_AGENT)?);
    let demo_client = client(sim, DEMO_AGENT)?;
    let (tracker, watch_task) = Tracker::start(demo_client.clone());
    let outcome = async {
        wait_for_operator(sim, &operator).await?;
        let nodes = options.maintained_nodes(&scenario);
        writeln!(
            out,
            "nmo is watching; putting {} nodes into maintenance at once: {}",
            nodes.len(),
            nodes.join(", ")
        )?;
        let started = Instant::now();
        let names = maintenance::create_all(&demo_client, &tracker, &nodes, "nmo demo").await?;
        let progress = progress::Progress::start(&tracker, names.clone(), display);
        let finished = tracker
            .wait_until(options.timeout(), |state| {
                names.iter().all(|n| {
                    state.get(n).is_some_and(|t| {
                        t.succeeded() || t.phase() == Some(nmo::crd::MaintenancePhase::Failed)
                    })
                })
            })
            .await;
        let drained_in = started.elapsed();
        progress.finish().await;
        let rows = summary::rows(&tracker.snapshot(), &names);
        let requests = RequestTotals::of(sim, &Query::all().user_agent(OPERATOR_AGENT));
        writeln!(out)?;
        out.write_all(summary::drain_table(&rows, &requests).as_bytes())?;
        out.write_all(summary::requests_lines(&rows, &requests).as_bytes())?;
        if !finished {
            writeln!(
                out,
                "not every maintenance finished within {:?}",
                options.timeout()
            )?;
        } else {
            writeln!(
                out,
                "all {} maintenances done in {:.2} s",
                names.len(),
                drained_in.as_secs_f64()
            )?;
        }
        if options.keep {
            keep_serving(sim, out)?;
            keep_until.await;
        }
        writeln!(out, "\ndeleting the NodeMaintenances")?;
        maintenance::delete_all(&demo_client, &names).await?;
        let restored = wait_restored(sim, &tracker, &names, &nodes).await;
        out.write_all(summary::restored_table(&restored).as_bytes())?;
        Ok::<DemoReport, DemoError>(DemoReport {
            rows,
            requests,
            drained_in,
            restored,
        })
    }
    .await;
    watch_task.abort();
    let stopped = operator.stop().await;
    let report = outcome?;
    stopped?;
    Ok(report)
}

/// Waits until the operator watches NodeMaintenances (its start-up is done).
async fn wait_for_operator(
    sim: &SimHandle,
    operator: &embedded::EmbeddedOperator,
) -> Result<(), DemoError> {
    let watching = Query::all()
        .verb("watch")
        .resource("nodemaintenances")
        .user_agent(OPERATOR_AGENT);
    let deadline = Instant::now() + START_TIMEOUT;
    while sim.requests(&watching) == 0 {
        if operator.has_stopped() {
            return Err(DemoError::Operator("nmo stopped while starting".into()));
        }
        if Instant::now() > deadline {
            return Err(DemoError::Timeout {
                what: "nmo to watch NodeMaintenances".into(),
                after: START_TIMEOUT,
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Waits until every NodeMaintenance is gone and its node restored (or the time is up), and
/// returns the nodes' marks as they are then.
async fn wait_restored(
    sim: &SimHandle,
    tracker: &Tracker,
    names: &[String],
    nodes: &[String],
) -> Vec<NodeMarks> {
    let deadline = Instant::now() + RESTORE_TIMEOUT;
    loop {
        let marks: Vec<NodeMarks> = nodes
            .iter()
            .filter_map(|n| NodeMarks::read(sim, n))
            .collect();
        let gone = tracker::all_gone(&tracker.snapshot(), names);
        if (gone && marks.iter().all(NodeMarks::restored)) || Instant::now() > deadline {
            return marks;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Where `--keep` writes its kubeconfig.
pub fn kubeconfig_path() -> PathBuf {
    std::env::temp_dir().join("nmo-demo.kubeconfig")
}

fn keep_serving(sim: &SimHandle, out: &mut (dyn Write + Send)) -> Result<(), DemoError> {
    let path = kubeconfig_path();
    sim.write_kubeconfig(&path)?;
    writeln!(
        out,
        "\nthe simulator and nmo keep serving; in another terminal:\n\n  KUBECONFIG={} kubectl get nm -w\n\n\
         (kubectl get nodes, kubectl delete nm <name> work too). Ctrl-C deletes the remaining \
         NodeMaintenances, shows the nodes restored and exits.",
        path.display()
    )?;
    out.flush()?;
    Ok(())
}
