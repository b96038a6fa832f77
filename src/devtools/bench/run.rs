//! One scenario end to end: the simulator in this process, `nmo run` in a child, every
//! NodeMaintenance created at once, timed until all are Succeeded.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::error::BenchError;
use super::process::OperatorProcess;
use super::result::ScenarioResult;
use super::scenario::BenchScenario;
use crate::devtools::demo::requests::RequestTotals;
use crate::devtools::demo::tracker::{self, Tracker};
use crate::devtools::demo::{DemoError, maintenance};
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
        .crd(&crate::crd::definition())?
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
    let kubeconfig: PathBuf = dir.join(format!("{}.kubeconfig", scenario.name));
    sim.write_kubeconfig_with_token(&kubeconfig, OPERATOR_TOKEN)?;
    let log = dir.join(format!("{}.nmo.log", scenario.name));
    let mut operator = OperatorProcess::spawn(nmo, &kubeconfig, scenario.eviction_rate, &log)?;
    let ours = Query::all().user(OPERATOR_USER);
    wait_watching(sim, &mut operator).await?;

    let client = sim.kube_client_with(&ClientOptions {
        user_agent: "nmo-bench-driver".into(),
        token: Some(DRIVER_TOKEN.into()),
        retry: true,
    })?;
    let (tracker, watch_task) = Tracker::start(client.clone());
    let before = operator.usage()?;
    let nodes = scenario.maintained_nodes();
    let started = Instant::now();
    let names = maintenance::create_all(&client, &tracker, &nodes, "benchmark").await?;
    let finished = tracker
        .wait_until(scenario.timeout, |state| {
            tracker::all_succeeded(state, &names)
        })
        .await;
    let wall = started.elapsed();
    tokio::time::sleep(SETTLE).await;
    let after = operator.usage()?;
    let requests = RequestTotals::of(sim, &ours);
    let state = tracker.snapshot();
    watch_task.abort();
    if operator.exited() {
        return Err(BenchError::OperatorExited(
            operator.log().display().to_string(),
        ));
    }
    operator.stop();
    if !finished {
        return Err(DemoError::Timeout {
            what: format!("every maintenance of scenario {} to succeed", scenario.name),
            after: scenario.timeout,
        }
        .into());
    }
    let drained: Vec<Duration> = names
        .iter()
        .filter_map(|n| state.get(n).and_then(|t| t.time_to_drained()))
        .collect();
    // Pods counted when each maintenance began, or the pods actually removed when more were:
    // while the first nodes drain, replacements may land on nodes not yet cordoned, which
    // then evict them too.
    let counted: u64 = names
        .iter()
        .filter_map(|n| state.get(n))
        .map(|t| t.pods_to_evict())
        .sum();
    let removed = requests.eviction_responses.get(&201).copied().unwrap_or(0)
        + requests.by_request.get("delete pods").copied().unwrap_or(0);
    let evicted_pods = counted.max(removed);
    Ok(ScenarioResult::new(
        scenario,
        wall,
        &drained,
        evicted_pods,
        requests,
        after,
        after.cpu.saturating_sub(before.cpu),
    ))
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
    let deadline = Instant::now() + START_TIMEOUT;
    while sim.requests(&watching) == 0 {
        if operator.exited() {
            return Err(BenchError::OperatorExited(
                operator.log().display().to_string(),
            ));
        }
        if Instant::now() > deadline {
            return Err(DemoError::Timeout {
                what: "nmo run to watch NodeMaintenances".into(),
                after: START_TIMEOUT,
            }
            .into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}
