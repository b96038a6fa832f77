//! Runs the rules of [`super::rules`] against the cluster: which lookups happen depends on the
//! earlier answers (a worker node never costs a PDB list), and a failed lookup refuses.

use std::time::Duration;

use kube::Client;
use tracing::debug;

use super::lookups;
use super::rules::{self, Denial, EtcdGuard};
use crate::crd::NodeMaintenance;

/// How long all lookups of one review may take together: under the API server's 10 s webhook
/// timeout, so that the user gets our "please try again" rather than a bare timeout.
pub const LOOKUP_BUDGET: Duration = Duration::from_secs(8);

/// CREATE: node exists, no other NodeMaintenance for it, control-plane quorum.
pub async fn create(client: &Client, nm: &NodeMaintenance) -> Result<(), Denial> {
    // Checked before any lookup: it needs none.
    rules::drain_timeout_valid(nm)?;
    let node_name = nm.spec.node_name.as_str();
    match tokio::time::timeout(LOOKUP_BUDGET, create_unbounded(client, node_name)).await {
        Ok(verdict) => verdict,
        Err(_) => Err(Denial::lookup_failed(
            &format!("validate node {node_name} in time"),
            format!("lookups took longer than {} s", LOOKUP_BUDGET.as_secs()),
        )),
    }
}

/// UPDATE: the node name must not change and a `drainTimeout` must be valid; the rest of the
/// object (status, finalizers, reason) changes freely, and the node may be gone by then.
pub fn update(old: &NodeMaintenance, new: &NodeMaintenance) -> Result<(), Denial> {
    rules::node_name_unchanged(old, new)?;
    rules::drain_timeout_valid(new)
}

/// A kube error in one line for the user: the API server's own message when it sent one (its
/// Display also dumps the whole Status structure).
fn describe(error: kube::Error) -> String {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => {
            format!("{} ({})", status.message, status.code)
        }
        other => other.to_string(),
    }
}

async fn create_unbounded(client: &Client, node_name: &str) -> Result<(), Denial> {
    if node_name.is_empty() {
        // No node has an empty name; asking would only fail client-side and say "try again".
        rules::node_exists(node_name, None)?;
    }
    let node = lookups::node(client, node_name).await.map_err(|e| {
        Denial::lookup_failed(
            &format!("get node {node_name} for validating spec.NodeName"),
            describe(e),
        )
    })?;
    let node = rules::node_exists(node_name, node.as_ref())?;

    let existing = lookups::maintenances(client).await.map_err(|e| {
        Denial::lookup_failed(
            "list NodeMaintenances for validating spec.NodeName",
            describe(e),
        )
    })?;
    rules::no_other_maintenance(node_name, &existing)?;

    if !rules::is_control_plane(node) {
        return Ok(());
    }
    debug!(node = node_name, "control-plane node: checking etcd quorum");
    let pdbs = lookups::etcd_pdbs(client).await.map_err(|e| {
        Denial::lookup_failed(
            &format!(
                "list PodDisruptionBudgets in {} for control-plane quorum validation",
                rules::ETCD_NAMESPACE
            ),
            describe(e),
        )
    })?;
    match rules::etcd_guard(node_name, &pdbs)? {
        EtcdGuard::Allows => Ok(()),
        EtcdGuard::CheckGuardPods { selector } => {
            let pods = lookups::guard_pods(client, &selector, node_name)
                .await
                .map_err(|e| {
                    Denial::lookup_failed(
                        &format!("list etcd guard pods ({selector}) on node {node_name}"),
                        describe(e),
                    )
                })?;
            rules::guard_pods_allow(node_name, &pods)
        }
        EtcdGuard::Absent => {
            // Only another NodeMaintenance (none is for this node, checked above) can make this
            // refuse: skip the node lists when there is none.
            if existing.is_empty() {
                return Ok(());
            }
            let control_plane = lookups::control_plane_node_names(client)
                .await
                .map_err(|e| {
                    Denial::lookup_failed(
                        "list control-plane nodes for quorum validation",
                        describe(e),
                    )
                })?;
            rules::no_other_control_plane_in_maintenance(node_name, &existing, &control_plane)
        }
    }
}
