//! Step 1 of `nmo uninstall`: every NodeMaintenance deleted, and the wait until nmo has given
//! their nodes back (it releases the finalizer last, so a NodeMaintenance that is gone is one
//! whose node is given back).

use std::io::Write;
use std::time::{Duration, Instant};

use crate::crd::NodeMaintenance;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, ListParams};

use super::{NMO_LABEL, POLL_INTERVAL, UninstallError, bounded, is_not_found};

/// How often the same progress line is printed again while nothing changes.
const REPEAT_PROGRESS: Duration = Duration::from_secs(15);

/// Deletes every NodeMaintenance and waits up to `timeout` until none is left.
pub async fn end_all(
    client: &kube::Client,
    timeout: Duration,
    out: &mut (dyn Write + Send),
) -> Result<(), UninstallError> {
    let api: Api<NodeMaintenance> = Api::all(client.clone());
    let Some(existing) = list(&api).await? else {
        writeln!(out, "no NodeMaintenance CRD: no maintenance to end")?;
        return Ok(());
    };
    if existing.is_empty() {
        writeln!(out, "no NodeMaintenance to end")?;
        return Ok(());
    }
    writeln!(
        out,
        "ending {} NodeMaintenance(s): {}",
        existing.len(),
        describe(&existing)
    )?;
    for maintenance in existing
        .iter()
        .filter(|nm| nm.metadata.deletion_timestamp.is_none())
    {
        let name = maintenance.metadata.name.clone().unwrap_or_default();
        let deleted = bounded(
            format!("delete NodeMaintenance {name}"),
            api.delete(&name, &DeleteParams::default()),
        )
        .await;
        match deleted {
            Err(error) if !is_not_found(&error) => return Err(error),
            _ => {}
        }
    }
    wait_until_none(client, &api, timeout, out).await
}

/// Waits until no NodeMaintenance is left, printing which are left when that changes.
async fn wait_until_none(
    client: &kube::Client,
    api: &Api<NodeMaintenance>,
    timeout: Duration,
    out: &mut (dyn Write + Send),
) -> Result<(), UninstallError> {
    let deadline = Instant::now() + timeout;
    let mut reported = String::new();
    let mut reported_at = Instant::now();
    loop {
        let remaining = list(api).await?.unwrap_or_default();
        if remaining.is_empty() {
            writeln!(out, "every NodeMaintenance has ended, its node given back")?;
            return Ok(());
        }
        let described = describe(&remaining);
        let now = Instant::now();
        if now >= deadline {
            return Err(UninstallError::MaintenancesRemain {
                count: remaining.len(),
                remaining: described,
                nmo: nmo_deployments(client).await,
                after: timeout,
            });
        }
        if described != reported || reported_at.elapsed() >= REPEAT_PROGRESS {
            writeln!(
                out,
                "waiting for {} NodeMaintenance(s) to end: {described}",
                remaining.len()
            )?;
            reported = described;
            reported_at = now;
        }
        tokio::time::sleep(POLL_INTERVAL.min(deadline - now)).await;
    }
}

/// Every NodeMaintenance; None when the CRD is not installed.
async fn list(api: &Api<NodeMaintenance>) -> Result<Option<Vec<NodeMaintenance>>, UninstallError> {
    match bounded("list NodeMaintenances", api.list(&ListParams::default())).await {
        Ok(list) => Ok(Some(list.items)),
        Err(error) if is_not_found(&error) => Ok(None),
        Err(error) => Err(error),
    }
}

/// `nm-1 on node worker-1 (Running), ...`.
fn describe(maintenances: &[NodeMaintenance]) -> String {
    maintenances
        .iter()
        .map(|nm| {
            let phase = nm
                .status
                .as_ref()
                .and_then(|status| status.phase)
                .map_or("no phase yet".to_string(), |phase| format!("{phase:?}"));
            format!(
                "{} on node {} ({phase})",
                nm.metadata.name.as_deref().unwrap_or_default(),
                nm.spec.node_name
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What is seen of nmo's Deployments, for the message that says why the maintenances did not
/// end.
async fn nmo_deployments(client: &kube::Client) -> String {
    let api: Api<Deployment> = Api::all(client.clone());
    let listed = bounded(
        "list nmo's Deployments",
        api.list(&ListParams::default().labels(NMO_LABEL)),
    )
    .await;
    let deployments = match listed {
        Ok(list) => list.items,
        Err(error) => return format!("nmo's Deployment could not be read ({error})"),
    };
    if deployments.is_empty() {
        return format!("No Deployment labelled {NMO_LABEL} was found (is nmo installed?)");
    }
    deployments
        .iter()
        .map(|deployment| {
            let wanted = deployment
                .spec
                .as_ref()
                .and_then(|spec| spec.replicas)
                .unwrap_or(1);
            let ready = deployment
                .status
                .as_ref()
                .and_then(|status| status.ready_replicas)
                .unwrap_or(0);
            format!(
                "nmo's Deployment {}/{} has {ready} of {wanted} replica(s) ready",
                deployment.metadata.namespace.as_deref().unwrap_or_default(),
                deployment.metadata.name.as_deref().unwrap_or_default(),
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}
