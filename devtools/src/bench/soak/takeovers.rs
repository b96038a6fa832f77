//! The soak's lease takeovers: maintenances in progress on free nodes, then another operator
//! (`node-healthcheck`) overwrites each node lease with a fresh renewal while nmo holds it, as
//! Node Health Check or an admin forcing a takeover would. Each maintenance must give up
//! (Failed, `errorOnLeaseCount` above 3) without nmo ever writing the holder's lease; the time
//! from the takeover to Failed is reported. The holder then finishes (its lease deleted, the
//! node uncordoned, as it would when done) and the NodeMaintenances are deleted, so the end
//! state is that of the waves.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};
use nmo::crd::NodeMaintenance;
use nmo_sim::SimHandle;
use serde::Serialize;
use serde_json::{Value, json};

use super::BenchError;
use super::config::{SoakConfig, create_maintenance, nm_name};
use super::end_state::EndState;
use super::replicas::Replicas;

/// What these rounds read of the cluster takes every cordon for a mark of nmo's: a node a
/// person cordoned (the injections') is never taken for a free one.
static NO_ADMIN_CORDONS: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();

/// The other operator.
const HOLDER: &str = "node-healthcheck";
/// The node leases' namespace.
const LEASES: &str = "medik8s-leases";
/// How often a takeover's maintenances are looked at.
const POLL: Duration = Duration::from_millis(50);

/// What the takeovers found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Takeovers {
    /// Per maintenance: from the takeover to Failed, seconds.
    pub failed_s: Vec<f64>,
    /// Maintenances that did not give up in time, or gave up wrongly (with why).
    pub wrong: Vec<String>,
}

/// Runs `config.takeovers` takeovers (see the module docs).
pub(super) async fn run(
    sim: &SimHandle,
    config: &SoakConfig,
    client: &Client,
    replicas: &mut Replicas,
) -> Result<Takeovers, BenchError> {
    // Over 80 lines: a takeover as its phases in order (wait until nmo holds every lease, take the
    // leases over, wait for nmo to give up, check the leases were left alone), sharing the nodes
    // and what was taken.
    let mut found = Takeovers::default();
    if config.takeovers == 0 {
        return Ok(found);
    }
    let nodes: Vec<String> = EndState::read(sim, config, &NO_ADMIN_CORDONS)
        .free_nodes()
        .into_iter()
        .take(config.takeovers)
        .collect();
    let maintenances: Api<NodeMaintenance> = Api::all(client.clone());
    for node in &nodes {
        create_maintenance(&maintenances, node, "soak takeover".into()).await;
    }
    // Taken over once nmo holds the lease and its status says so.
    let held = Instant::now() + config.wave_timeout;
    while Instant::now() < held && !nodes.iter().all(|n| nmo_holds(sim, n)) {
        replicas.tend()?;
        tokio::time::sleep(POLL).await;
    }
    // Said when one does not give up in time, to tell a slow give-up from one that never began.
    let held_before: Vec<bool> = nodes.iter().map(|n| nmo_holds(sim, n)).collect();
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASES);
    let mut taken = Vec::new();
    for node in &nodes {
        let now = chrono::Utc::now()
            .format("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string();
        let patch = json!({"spec": {
            "holderIdentity": HOLDER, "leaseDurationSeconds": 3600,
            "acquireTime": now, "renewTime": now,
        }});
        match leases
            .patch(
                &format!("node-{node}"),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(lease) => taken.push((
                node.clone(),
                lease.metadata.resource_version,
                Instant::now(),
            )),
            Err(error) => found
                .wrong
                .push(format!("{node}: the takeover failed: {error}")),
        }
    }
    let deadline = Instant::now() + config.recovery_timeout;
    let mut waiting = taken.clone();
    while !waiting.is_empty() && Instant::now() < deadline {
        replicas.tend()?;
        waiting.retain(|(node, _, at)| match failed(sim, &nm_name(node)) {
            Some(count) if count > 3 => {
                found.failed_s.push(at.elapsed().as_secs_f64());
                false
            }
            Some(count) => {
                found.wrong.push(format!(
                    "{}: Failed with errorOnLeaseCount {count}",
                    nm_name(node)
                ));
                false
            }
            None => true,
        });
        tokio::time::sleep(POLL).await;
    }
    found.wrong.extend(waiting.iter().map(|(node, ..)| {
        let held = nodes
            .iter()
            .position(|n| n == node)
            .is_some_and(|i| held_before[i]);
        format!(
            "{}: not Failed in time (nmo held the lease before the takeover: {held}; now {})",
            nm_name(node),
            describe(sim, node)
        )
    }));
    for (node, version, _) in &taken {
        let now =
            node_lease(sim, node).and_then(|l| l.pointer("/metadata/resourceVersion").cloned());
        if now.as_ref().and_then(Value::as_str) != version.as_deref() {
            found
                .wrong
                .push(format!("{node}: the holder's lease was written ({now:?})"));
        }
    }
    finish(sim, config, client, replicas, &nodes).await?;
    Ok(found)
}

/// Whether nmo holds the node's lease and its maintenance's status says so (`LeaseAcquired`
/// True). A lease taken before nmo wrote down (in the status, or as its record on the node)
/// that it held it looks to a new leader like any lease another holder has: it waits for it,
/// as for a fresh maintenance, and has nothing of its own on the node to undo. The soak's
/// leader changes make that window real, so the takeover waits until it is closed.
fn nmo_holds(sim: &SimHandle, node: &str) -> bool {
    let holder = node_lease(sim, node).and_then(|l| {
        l.pointer("/spec/holderIdentity")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    let says_held = maintenance(sim, node)
        .and_then(|nm| nm.pointer("/status/conditions").cloned())
        .and_then(|c| c.as_array().cloned())
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("LeaseAcquired")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        });
    holder.as_deref() == Some("node-maintenance") && says_held
}

/// The maintenance's phase, `errorOnLeaseCount` and `lastError`, and the lease's holder, as
/// they are now.
fn describe(sim: &SimHandle, node: &str) -> String {
    let nm = maintenance(sim, node);
    let field = |pointer: &str| {
        nm.as_ref()
            .and_then(|nm| nm.pointer(pointer))
            .map_or_else(|| "none".to_string(), Value::to_string)
    };
    let holder = node_lease(sim, node)
        .and_then(|l| l.pointer("/spec/holderIdentity").cloned())
        .map_or_else(|| "none".to_string(), |h| h.to_string());
    format!(
        "phase {}, errorOnLeaseCount {}, lastError {}, lease holder {holder}",
        field("/status/phase"),
        field("/status/errorOnLeaseCount"),
        field("/status/lastError"),
    )
}

/// The node's lease as the simulator stores it now.
fn node_lease(sim: &SimHandle, node: &str) -> Option<Value> {
    sim.get_json(
        "coordination.k8s.io",
        "leases",
        LEASES,
        &format!("node-{node}"),
    )
}

/// The node's soak maintenance as the simulator stores it now.
fn maintenance(sim: &SimHandle, node: &str) -> Option<Value> {
    sim.get_json(
        "nodemaintenance.medik8s.io",
        "nodemaintenances",
        "",
        &nm_name(node),
    )
}

/// The `errorOnLeaseCount` of a Failed NodeMaintenance; None while it is not Failed.
fn failed(sim: &SimHandle, name: &str) -> Option<i64> {
    let nm = sim.get_json("nodemaintenance.medik8s.io", "nodemaintenances", "", name)?;
    (nm.pointer("/status/phase").and_then(Value::as_str) == Some("Failed")).then(|| {
        nm.pointer("/status/errorOnLeaseCount")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    })
}

/// The holder is done (its lease deleted, the node uncordoned) and the NodeMaintenances are
/// deleted; waits until they are gone (bounded by the wave timeout).
async fn finish(
    sim: &SimHandle,
    config: &SoakConfig,
    client: &Client,
    replicas: &mut Replicas,
    nodes: &[String],
) -> Result<(), BenchError> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASES);
    let node_api: Api<Node> = Api::all(client.clone());
    let maintenances: Api<NodeMaintenance> = Api::all(client.clone());
    for node in nodes {
        let _ = maintenances
            .delete(&nm_name(node), &DeleteParams::default())
            .await;
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
    for node in nodes {
        let _ = leases
            .delete(&format!("node-{node}"), &DeleteParams::default())
            .await;
        let uncordon = json!({"spec": {"unschedulable": false, "taints": null}});
        let _ = node_api
            .patch(node, &PatchParams::default(), &Patch::Merge(&uncordon))
            .await;
    }
    Ok(())
}
