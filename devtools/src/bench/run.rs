//! One scenario end to end: the simulator in this process, `nmo run` in a child, every
//! NodeMaintenance created at once, timed until all are Succeeded.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::error::BenchError;
use super::interactions::{self, ExpectedBlock};
use super::pdb_clock::PdbClock;
use super::policy::{self, PolicyFigures, PolicyInputs};
use super::process::{self, OperatorProcess};
use super::result::ScenarioResult;
use super::scenario::BenchScenario;
use crate::demo::requests::RequestTotals;
use crate::demo::tracker::{self, Tracker};
use crate::demo::{DemoError, maintenance};
use nmo_sim::{ClientOptions, Query, SimConfig, SimHandle, Simulator};

/// The user the operator's token maps to in the simulator: its requests are counted under it.
pub const OPERATOR_USER: &str = "nmo";
const OPERATOR_TOKEN: &str = "bench-operator-token";
const DRIVER_USER: &str = "bench-driver";
const DRIVER_TOKEN: &str = "bench-driver-token";
/// How long `nmo run` may take to start watching.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Time after the last Succeeded for requests still in flight to be counted.
const SETTLE: Duration = Duration::from_millis(500);

/// Runs one scenario with the operator binary `nmo`; scratch files go to `dir`.
pub async fn run(
    scenario: &BenchScenario,
    nmo: &Path,
    dir: &Path,
) -> Result<ScenarioResult, BenchError> {
    let mut config = SimConfig::default()
        .scenario(scenario.scenario())
        .crd(&nmo::crd::definition())?
        .token(OPERATOR_TOKEN, OPERATOR_USER)
        .token(DRIVER_TOKEN, DRIVER_USER);
    config.timing = scenario.timing();
    let sim = Simulator::start(config).await?;
    let outcome = measure(&sim, scenario, nmo, dir).await;
    sim.shutdown().await;
    outcome
}

async fn measure(
    sim: &SimHandle,
    scenario: &BenchScenario,
    nmo: &Path,
    dir: &Path,
) -> Result<ScenarioResult, BenchError> {
    // Over 80 lines: one benchmark run as its steps in order (operator, watch, create, wait, read
    // the counters, assemble the result), sharing the run's handles.
    let kubeconfig: PathBuf = dir.join(format!("{}.kubeconfig", scenario.name));
    sim.write_kubeconfig_with_token(&kubeconfig, OPERATOR_TOKEN)?;
    let log = dir.join(format!("{}.nmo.log", scenario.name));
    // A budgeted scenario reads nmo's own count of diagnosis reads from its metrics.
    let metrics = scenario.has_pdbs().then(process::free_local_addr).flatten();
    let mut operator =
        OperatorProcess::spawn(nmo, &kubeconfig, scenario.eviction_rate, metrics, &log)?;
    let ours = Query::all().user(OPERATOR_USER);
    wait_watching(sim, &mut operator).await?;

    let client = sim.kube_client_with(&ClientOptions {
        user_agent: "nmo-bench-driver".into(),
        token: Some(DRIVER_TOKEN.into()),
        retry: true,
    })?;
    if let Some(traps) = scenario.traps {
        let layout = scenario.scenario();
        interactions::set_up(&client, sim, traps, |i| layout.node_name(i)).await?;
    }
    let (tracker, watch_task) = Tracker::start(client.clone());
    let before = operator.usage()?;
    let nodes = scenario.maintained_nodes();
    let expected = scenario.expected_blocks();
    let pods_per_budget = pods_per_drainable_pdb(sim, &nodes);
    let started = Instant::now();
    let clock = scenario.has_pdbs().then(|| PdbClock::start(sim, started));
    let names = maintenance::create_all(&client, &tracker, &nodes, "benchmark").await?;
    let must_succeed: Vec<String> = names
        .iter()
        .filter(|n| !expected.iter().any(|e| &e.maintenance == *n))
        .cloned()
        .collect();
    let finished = tracker
        .wait_until(scenario.timeout, |state| {
            tracker::all_succeeded(state, &must_succeed) && all_shown(state, &expected)
        })
        .await;
    let wall = started.elapsed();
    tokio::time::sleep(SETTLE).await;
    let after = operator.usage()?;
    let requests = RequestTotals::of(sim, &ours);
    let state = tracker.snapshot();
    watch_task.abort();
    let times = clock.map(PdbClock::finish);
    let diagnosis_reads = match metrics {
        Some(addr) => process::scrape_counter(addr, "nmo_drain_diagnosis_reads_total").await,
        None => None,
    };
    if operator.exited() {
        return Err(BenchError::OperatorExited(
            operator.log().display().to_string(),
        ));
    }
    operator.stop();
    // A trapped maintenance that never shows its diagnosis is a missed target, not a failed
    // run; a maintenance that never drains is.
    let drained_all = tracker::all_succeeded(&state, &must_succeed);
    if !finished && !drained_all {
        return Err(DemoError::Timeout {
            what: format!("every maintenance of scenario {} to succeed", scenario.name),
            after: scenario.timeout,
        }
        .into());
    }
    let drained = tracker::drain_times(&state, &must_succeed);
    // Pods counted when each maintenance began, or the pods actually removed when more were:
    // while the first nodes drain, replacements may land on nodes not yet cordoned, which
    // then evict them too.
    let evicted_pods = tracker::pods_to_evict(&state, &names).max(requests.pods_removed());
    let policy = times.map(|times| {
        PolicyFigures::new(PolicyInputs {
            started,
            refused: requests.too_many_requests,
            evicted_pods,
            times,
            pods_per_budget,
            startup: scenario.startup(),
            grace: scenario.grace(),
            state: &state,
            names: &names,
            expected: &expected,
            diagnosis_reads,
        })
    });
    Ok(ScenarioResult::new(
        scenario,
        wall,
        &drained,
        evicted_pods,
        requests,
        after,
        after.cpu.saturating_sub(before.cpu),
    )
    .with_policy(policy))
}

/// Whether every trapped maintenance shows what it must.
fn all_shown(
    state: &std::collections::BTreeMap<String, tracker::Tracked>,
    expected: &[ExpectedBlock],
) -> bool {
    expected.iter().all(|e| {
        state
            .get(&e.maintenance)
            .is_some_and(|t| policy::shows(t, e))
    })
}

/// The most pods that one budget which can drain at all (`maxUnavailable` above 0, outside the
/// scenario's traps) has on the maintained `nodes`: its pods leave one replacement start-up
/// apart, so this sets the drain's floor.
fn pods_per_drainable_pdb(sim: &SimHandle, nodes: &[String]) -> usize {
    let traps = [interactions::STRUCTURAL_NS, interactions::PAIR_NS];
    let pods = sim.list_json("", "pods", "");
    sim.list_json("policy", "poddisruptionbudgets", "")
        .iter()
        .filter(|pdb| {
            let ns = pdb.pointer("/metadata/namespace").and_then(Value::as_str);
            !ns.is_some_and(|ns| traps.contains(&ns))
                && pdb.pointer("/spec/maxUnavailable") != Some(&serde_json::json!(0))
        })
        .map(|pdb| {
            let ns = pdb.pointer("/metadata/namespace").cloned();
            let labels = pdb
                .pointer("/spec/selector/matchLabels")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            pods.iter()
                .filter(|pod| pod.pointer("/metadata/namespace").cloned() == ns)
                .filter(|pod| {
                    pod.pointer("/spec/nodeName")
                        .and_then(Value::as_str)
                        .is_some_and(|n| nodes.iter().any(|m| m == n))
                })
                .filter(|pod| {
                    labels
                        .iter()
                        .all(|(k, v)| pod.pointer(&format!("/metadata/labels/{k}")) == Some(v))
                })
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// Waits until `nmo run` watches NodeMaintenances: its start-up is over.
pub async fn wait_watching(
    sim: &SimHandle,
    operator: &mut OperatorProcess,
) -> Result<(), BenchError> {
    let watching = Query::all()
        .verb("watch")
        .resource("nodemaintenances")
        .user(OPERATOR_USER);
    operator
        .wait_watching(START_TIMEOUT, Duration::from_millis(20), || {
            Ok(sim.requests(&watching) > 0)
        })
        .await
}
