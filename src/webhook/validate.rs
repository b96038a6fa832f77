//! Runs the rules of [`super::rules`] against the cluster: the node and the other
//! NodeMaintenances come from the webhook's caches; only a control-plane node's quorum check
//! reads the API (and a worker node never costs that). A failed or late lookup refuses.

use std::time::Duration;

use kube::Client;
use tokio::time::Instant;
use tracing::debug;

use super::lookups::{self, Lookups};
use super::rules::{self, Denial, EtcdGuard};
use crate::crd::NodeMaintenance;

/// How long a CREATE waits for caches that have not listed yet (just after start-up).
pub const CACHE_WAIT: Duration = Duration::from_secs(2);

/// CREATE: node exists, no other NodeMaintenance for it, control-plane quorum; decided by
/// `deadline` (else refused with "try again", before the API server gives up on the webhook).
pub async fn create(
    lookups: &Lookups,
    nm: &NodeMaintenance,
    deadline: Instant,
) -> Result<(), Denial> {
    // Checked before any lookup: they need none.
    rules::drain_timeout_valid(nm)?;
    let node_name = nm.spec.node_name.as_str();
    if node_name.is_empty() {
        // No node has an empty name.
        rules::node_exists(node_name, None)?;
    }
    if !lookups
        .caches
        .ready_by(deadline.min(Instant::now() + CACHE_WAIT))
        .await
    {
        return Err(Denial::lookup_failed(
            &format!("validate node {node_name}"),
            "the webhook has not listed the nodes and NodeMaintenances yet",
        ));
    }
    match tokio::time::timeout_at(deadline, against_the_cluster(lookups, node_name)).await {
        Ok(verdict) => verdict,
        Err(_) => Err(Denial::lookup_failed(
            &format!("validate node {node_name} in time"),
            "the quorum lookups did not answer in time",
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

async fn against_the_cluster(lookups: &Lookups, node_name: &str) -> Result<(), Denial> {
    let node = lookups.caches.node(node_name);
    let node = rules::node_exists(node_name, node.as_ref())?;
    let existing = lookups.caches.maintenances();
    rules::no_other_maintenance(node_name, &existing)?;

    if !rules::is_control_plane(node) {
        return Ok(());
    }
    debug!(node = node_name, "control-plane node: checking etcd quorum");
    let client: &Client = &lookups.client;
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
            let control_plane = lookups.caches.control_plane_node_names();
            rules::no_other_control_plane_in_maintenance(node_name, &existing, &control_plane)
        }
    }
}
