//! The soak's API server restarts: the simulated API server drops every connection, answers
//! every request 503 for the outage, and once back answers every resumed watch with 410 Expired
//! (`SimHandle::restart_api_server`: a kube-apiserver killed and started again while etcd keeps
//! the cluster). At its return new NodeMaintenances are created at once, and timed until each
//! is reconciled (finalizer and a phase in its status): the time from the server's return to
//! the first of them is how long nmo stayed deaf. Each round then lets them finish and deletes
//! them again, so the end state is that of the waves.

use std::time::{Duration, Instant};

use kube::api::DeleteParams;
use kube::{Api, Client};
use nmo::crd::NodeMaintenance;
use nmo_sim::SimHandle;
use serde::Serialize;
use serde_json::Value;

use super::BenchError;
use super::config::{SoakConfig, create_maintenance, nm_name};
use super::end_state::EndState;
use super::replicas::Replicas;

/// What these rounds read of the cluster takes every cordon for a mark of nmo's: a node a
/// person cordoned (the injections') is never taken for a free one.
static NO_ADMIN_CORDONS: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();

/// How often a round looks at its maintenances (finer than the soak's poll: it times them).
const POLL: Duration = Duration::from_millis(50);

/// What the restarts measured, seconds from the API server's return.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Recoveries {
    /// Per restart: how long the server was down, seconds.
    pub down_s: Vec<f64>,
    /// Per restart: until the first new maintenance was reconciled.
    pub first_s: Vec<f64>,
    /// Per maintenance: until it was reconciled.
    pub each_s: Vec<f64>,
    /// Maintenances not reconciled within the round's deadline.
    pub missed: Vec<String>,
    /// Connections the server dropped at each restart.
    pub dropped: Vec<usize>,
}

/// Runs a round per outage of `config.outages` (see the module docs).
pub(super) async fn run(
    sim: &SimHandle,
    config: &SoakConfig,
    client: &Client,
    replicas: &mut Replicas,
) -> Result<Recoveries, BenchError> {
    let api: Api<NodeMaintenance> = Api::all(client.clone());
    let mut recoveries = Recoveries::default();
    for (round, outage) in config.outages.iter().enumerate() {
        let nodes: Vec<String> = EndState::read(sim, config, &NO_ADMIN_CORDONS)
            .free_nodes()
            .into_iter()
            .take(config.per_restart)
            .collect();
        let dropped = sim.restart_api_server(*outage).await;
        recoveries.down_s.push(outage.as_secs_f64());
        let back = Instant::now();
        recoveries.dropped.push(dropped);
        for node in &nodes {
            create_maintenance(&api, node, format!("soak restart {round}")).await;
        }
        let mut waiting = nodes.clone();
        let mut first = None;
        while !waiting.is_empty() && back.elapsed() < config.recovery_timeout {
            replicas.tend()?;
            waiting.retain(|node| {
                if !reconciled(sim, &nm_name(node)) {
                    return true;
                }
                let took = back.elapsed().as_secs_f64();
                first.get_or_insert(took);
                recoveries.each_s.push(took);
                false
            });
            tokio::time::sleep(POLL).await;
        }
        recoveries.missed.extend(waiting.iter().map(|n| nm_name(n)));
        if let Some(first) = first {
            recoveries.first_s.push(first);
        }
        finish(sim, config, &api, replicas, &nodes).await?;
    }
    Ok(recoveries)
}

/// Whether the NodeMaintenance has nmo's finalizer and a phase.
fn reconciled(sim: &SimHandle, name: &str) -> bool {
    let Some(nm) = sim.get_json("nodemaintenance.medik8s.io", "nodemaintenances", "", name) else {
        return false;
    };
    let finalized = nm
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|list| !list.is_empty());
    finalized
        && nm
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .is_some()
}

/// Lets the round's maintenances succeed, then deletes them and waits until they are gone
/// (each bounded by the wave timeout: what does not finish shows in the end state).
async fn finish(
    sim: &SimHandle,
    config: &SoakConfig,
    api: &Api<NodeMaintenance>,
    replicas: &mut Replicas,
    nodes: &[String],
) -> Result<(), BenchError> {
    let deadline = Instant::now() + config.wave_timeout;
    while Instant::now() < deadline {
        replicas.tend()?;
        let state = EndState::read(sim, config, &NO_ADMIN_CORDONS);
        if nodes.iter().all(|n| state.succeeded(&nm_name(n))) {
            break;
        }
        tokio::time::sleep(super::POLL).await;
    }
    for node in nodes {
        let _ = api.delete(&nm_name(node), &DeleteParams::default()).await;
    }
    let deadline = Instant::now() + config.wave_timeout;
    while Instant::now() < deadline {
        replicas.tend()?;
        let state = EndState::read(sim, config, &NO_ADMIN_CORDONS);
        if nodes.iter().all(|n| !state.exists(&nm_name(n))) {
            break;
        }
        tokio::time::sleep(super::POLL).await;
    }
    Ok(())
}

/// The median and the largest of `values` (None when empty).
pub fn p50_and_max(values: &[f64]) -> Option<(f64, f64)> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let max = *sorted.last()?;
    Some((sorted[(sorted.len() - 1) / 2], max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_the_middle_one_and_the_lower_of_two() {
        assert_eq!(p50_and_max(&[]), None);
        assert_eq!(p50_and_max(&[3.0]), Some((3.0, 3.0)));
        assert_eq!(p50_and_max(&[5.0, 1.0, 3.0]), Some((3.0, 5.0)));
        assert_eq!(p50_and_max(&[4.0, 1.0]), Some((1.0, 4.0)));
    }
}
