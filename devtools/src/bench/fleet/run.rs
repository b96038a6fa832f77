//! One fleet scenario end to end: the simulator here, `nmo run` with the budget in a child,
//! every NodeMaintenance created at once, each deleted as soon as it succeeds, until all are
//! gone.

use std::path::Path;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Event;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use nmo_sim::{ClientOptions, Query, SimConfig, SimHandle, Simulator};

use super::observer::Observer;
use super::result::{FleetResult, Measured};
use super::scenario::FleetScenario;
use crate::bench::error::BenchError;
use crate::bench::process::OperatorProcess;
use crate::bench::run::{OPERATOR_USER, wait_watching};
use crate::demo::DemoError;
use crate::demo::maintenance::{self, name_for};
use crate::demo::requests::RequestTotals;
use nmo::crd::{NodeMaintenance, NodeMaintenanceSpec};

const OPERATOR_TOKEN: &str = "fleet-operator-token";
const DRIVER_TOKEN: &str = "fleet-driver-token";
const DRIVER_USER: &str = "fleet-driver";
/// Creates and deletes in flight at once.
const CONCURRENCY: usize = 64;
/// Time after the last maintenance is gone for requests in flight to be counted.
const SETTLE: Duration = Duration::from_millis(500);

/// Runs one fleet scenario with the operator binary `nmo`; scratch files go to `dir`.
pub async fn run(
    scenario: &FleetScenario,
    nmo: &Path,
    dir: &Path,
) -> Result<FleetResult, BenchError> {
    let config = SimConfig::default()
        .scenario(scenario.scenario())
        .crd(&nmo::crd::definition())?
        .token(OPERATOR_TOKEN, OPERATOR_USER)
        .token(DRIVER_TOKEN, DRIVER_USER)
        .time_scale(0.0);
    let sim = Simulator::start(config).await?;
    let outcome = measure(&sim, scenario, nmo, dir).await;
    sim.shutdown().await;
    outcome
}

async fn measure(
    sim: &SimHandle,
    scenario: &FleetScenario,
    nmo: &Path,
    dir: &Path,
) -> Result<FleetResult, BenchError> {
    let kubeconfig = dir.join(format!("{}.kubeconfig", scenario.name));
    sim.write_kubeconfig_with_token(&kubeconfig, OPERATOR_TOKEN)?;
    let log = dir.join(format!("{}.nmo.log", scenario.name));
    let mut operator =
        OperatorProcess::spawn_with(nmo, &kubeconfig, &scenario.operator_args(), &[], &log)?;
    wait_watching(sim, &mut operator).await?;
    let client = sim.kube_client_with(&ClientOptions {
        user_agent: "nmo-fleet-driver".into(),
        token: Some(DRIVER_TOKEN.into()),
        retry: true,
    })?;
    let (observer, tasks) = Observer::start(&client);
    if !observer.nodes_listed(Duration::from_secs(60)).await {
        return Err(timeout(
            "the driver's node watch to list",
            Duration::from_secs(60),
        ));
    }
    let before = operator.usage()?;
    let nodes = scenario.maintained_nodes();
    let names: Vec<String> = nodes.iter().map(|n| name_for(n)).collect();
    let started = Instant::now();
    create_all(&client, &observer, &nodes).await?;
    let deadline = started + scenario.timeout;
    loop {
        let to_delete = observer.take_to_delete();
        maintenance::delete_all(&client, &to_delete).await?;
        let seen = observer.snapshot();
        let all_gone = names
            .iter()
            .all(|n| seen.maintenances.get(n).is_some_and(|t| t.gone.is_some()));
        if all_gone {
            break;
        }
        if operator.exited() {
            return Err(BenchError::OperatorExited(
                operator.log().display().to_string(),
            ));
        }
        if Instant::now() > deadline {
            return Err(timeout(
                &format!(
                    "every maintenance of scenario {} to run and go",
                    scenario.name
                ),
                scenario.timeout,
            ));
        }
        observer.changed(Duration::from_millis(200)).await;
    }
    let wall = started.elapsed();
    tokio::time::sleep(SETTLE).await;
    let after = operator.usage()?;
    let seen = observer.snapshot();
    for task in tasks {
        task.abort();
    }
    let ours = Query::all().user(OPERATOR_USER);
    let measured = Measured {
        wall,
        queued_events: queued_events(&client).await?,
        watches: sim.requests(&ours.clone().verb("watch").resource("nodes"))
            + sim.requests(&ours.clone().verb("watch").resource("pods")),
        maintenance_gets: sim.requests(&ours.clone().verb("get").resource("nodemaintenances")),
        requests: RequestTotals::of(sim, &ours),
        usage: after,
        cpu: after.cpu.saturating_sub(before.cpu),
    };
    operator.stop();
    Ok(FleetResult::new(scenario, &seen, measured))
}

fn timeout(what: &str, after: Duration) -> BenchError {
    DemoError::Timeout {
        what: what.to_string(),
        after,
    }
    .into()
}

async fn create_all(
    client: &Client,
    observer: &Observer,
    nodes: &[String],
) -> Result<(), BenchError> {
    let api: Api<NodeMaintenance> = Api::all(client.clone());
    futures::stream::iter(nodes)
        .map(|node| {
            let api = api.clone();
            async move {
                let name = name_for(node);
                let nm = NodeMaintenance::new(
                    &name,
                    NodeMaintenanceSpec {
                        node_name: node.clone(),
                        reason: Some("fleet benchmark".into()),
                        drain_timeout: None,
                        on_drain_timeout: None,
                    },
                );
                observer.created(&name, Instant::now());
                api.create(&PostParams::default(), &nm)
                    .await
                    .map(drop)
                    .map_err(|source| DemoError::Create { name, source })
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// The `QueuedMaintenance` events nmo emitted (in `default`, like every NodeMaintenance event).
async fn queued_events(client: &Client) -> Result<u64, BenchError> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    let events = api
        .list(&ListParams::default())
        .await
        .map_err(|source| BenchError::Kube {
            what: "list events".into(),
            source,
        })?;
    let count = events
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("QueuedMaintenance"))
        .count();
    Ok(u64::try_from(count).unwrap_or(u64::MAX))
}
