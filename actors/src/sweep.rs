//! The orphan sweep: nodes nmo changed (its record, or the drain taint of an operator that
//! kept none) and leases it holds, for which no NodeMaintenance exists any more, e.g. because
//! someone removed the finalizer while nmo was down. They are undone as their record says.
//!
//! Run by the supervisor at start and after every relist of the NodeMaintenances. A node is
//! only ever an orphan when NO NodeMaintenance targets it: the Go operator (which must not run
//! alongside nmo, but might) marks and leases nodes under the same names, and a node of a live
//! NodeMaintenance is its driver's business whoever drives it. Other medik8s operators' leases
//! (holder `node-healthcheck`, ...) are never touched, and a node whose lease another operator
//! validly holds keeps its cordon (see [`crate::decisions::undo_patch`]).
//!
//! A NodeMaintenance created while the sweep runs must lose nothing to it, so each suspect is
//! looked at again just before it is undone ([`give_back`]): its lease and node are read
//! afresh, then the NodeMaintenances are listed (a maintenance marks its node or takes its
//! lease only after it exists, so one that changed what was just read is in that list), and
//! the node is left alone if any targets it or its lease changed since the first look. The
//! writes that follow are conditional on those reads (the node's resourceVersion, the lease's),
//! so a maintenance that starts after the re-check makes them fail instead of being undone:
//! the node is then looked at again by the next sweep.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::config::Config;
use crate::decisions::{self, Undoer};
use crate::model::{Lease, MaintenanceName, NodeName, Uid};
use crate::node::ops::{OpCtx, announce};
use crate::node::{ReleaseError, UndoError};
use crate::ports::{Cluster, ClusterError};

/// The sweep could not look.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SweepError {
    /// Listing the marked nodes failed.
    #[error("cannot list marked nodes: {0}")]
    ListNodes(#[source] ClusterError),
    /// Listing the node leases failed.
    #[error("cannot list node leases: {0}")]
    ListLeases(#[source] ClusterError),
    /// Listing the NodeMaintenances failed.
    #[error("cannot list NodeMaintenances: {0}")]
    ListMaintenances(#[source] ClusterError),
}

/// What a sweep found and did.
#[derive(Debug, Default)]
pub struct SweepReport {
    /// Nodes given back.
    pub restored: Vec<NodeName>,
    /// Nodes left alone at the second look: a NodeMaintenance targets them now, or their lease
    /// changed since the first.
    pub spared: Vec<NodeName>,
    /// Nodes whose undo failed, or that changed while they were undone (tried again by the
    /// next sweep).
    pub failed: Vec<(NodeName, UndoError)>,
}

/// How the second look at a suspect ended.
enum Outcome {
    Restored,
    Spared(&'static str),
}

/// Finds orphans and undoes them; `driven` are the nodes the supervisor's node actors drive
/// (their NodeMaintenance may already be gone while their undo finishes).
pub(crate) async fn sweep(
    cluster: Arc<dyn Cluster>,
    config: Arc<Config>,
    driven: HashSet<NodeName>,
) -> Result<SweepReport, SweepError> {
    let marked = cluster
        .list_maintained_nodes()
        .await
        .map_err(SweepError::ListNodes)?;
    let leases = cluster
        .list_leases(&config.lease_namespace)
        .await
        .map_err(SweepError::ListLeases)?;
    // Each suspect with nmo's lease of it as listed (None: none was ours).
    let mut suspects: BTreeMap<NodeName, Option<Lease>> = marked
        .iter()
        .filter(|node| decisions::marked_by(node, Undoer::Sweep))
        .map(|node| (node.name.clone(), None))
        .collect();
    for lease in leases.into_iter().filter(decisions::lease_is_ours) {
        if let Some(node) = lease.name.strip_prefix("node-").map(NodeName::from) {
            suspects.insert(node, Some(lease));
        }
    }
    if suspects.is_empty() {
        return Ok(SweepReport::default());
    }
    let targeted = targeted_nodes(cluster.as_ref())
        .await
        .map_err(SweepError::ListMaintenances)?;
    let mut report = SweepReport::default();
    for (node, listed) in suspects {
        if targeted.contains(&node) || driven.contains(&node) {
            continue;
        }
        let ctx = OpCtx {
            cluster: cluster.clone(),
            config: config.clone(),
            nm_name: MaintenanceName::default(),
            nm_uid: Uid::default(),
            node_name: node.clone(),
            deleting: Arc::new(AtomicBool::new(true)),
        };
        match give_back(&ctx, listed.as_ref()).await {
            Ok(Outcome::Restored) => report.restored.push(node),
            Ok(Outcome::Spared(why)) => {
                tracing::info!(%node, why, "node no longer an orphan, left alone");
                report.spared.push(node);
            }
            Err(error) => {
                tracing::warn!(%node, %error, "cannot undo an orphaned node, trying again later");
                report.failed.push((node, error));
            }
        }
    }
    Ok(report)
}

/// The nodes a NodeMaintenance targets now.
async fn targeted_nodes(cluster: &dyn Cluster) -> Result<HashSet<NodeName>, ClusterError> {
    Ok(cluster
        .list_maintenances()
        .await?
        .into_iter()
        .map(|nm| nm.node_name)
        .collect())
}

/// Looks at the suspect `ctx.node_name` again and, if it is still an orphan, undoes it once,
/// every write conditional on what was just read (see the module's docs). `listed` is nmo's
/// lease of it as first listed.
async fn give_back(ctx: &OpCtx, listed: Option<&Lease>) -> Result<Outcome, UndoError> {
    let cluster = ctx.cluster.as_ref();
    let lease = cluster
        .get_lease(
            &ctx.config.lease_namespace,
            &decisions::lease_name(&ctx.node_name),
        )
        .await
        .map_err(|e| UndoError::Release(ReleaseError::Read(e)))?;
    let ours = lease.as_ref().filter(|l| decisions::lease_is_ours(l));
    let unchanged = |fresh: &Lease, listed: &Lease| {
        fresh.resource_version == listed.resource_version
            || (fresh.holder_identity == listed.holder_identity
                && fresh.renew_time == listed.renew_time)
    };
    let lease_moved = match (ours, listed) {
        (Some(fresh), Some(listed)) => !unchanged(fresh, listed),
        // Taken (or renewed into being) since the list.
        (Some(_), None) => true,
        (None, _) => false,
    };
    if lease_moved {
        return Ok(Outcome::Spared(
            "its lease changed since the sweep listed it",
        ));
    }
    let node = cluster
        .get_node(&ctx.node_name)
        .await
        .map_err(UndoError::ReadNode)?;
    let targeted = targeted_nodes(cluster)
        .await
        .map_err(UndoError::ListMaintenances)?;
    if targeted.contains(&ctx.node_name) {
        return Ok(Outcome::Spared("a NodeMaintenance targets it now"));
    }
    tracing::warn!(node = %ctx.node_name, "node changed or leased by nmo for a NodeMaintenance that no longer exists; undoing");
    let now = ctx.config.now();
    let foreign_holder = lease
        .as_ref()
        .is_some_and(|l| !decisions::lease_is_ours(l) && decisions::lease_valid(l, now));
    if let Some(node) = node
        && let Some(patch) = decisions::undo_patch(&node, Undoer::Sweep, foreign_holder)
    {
        // Once: a conflict means the node changed since the second look (a maintenance may
        // have begun), so it is looked at again by the next sweep, not patched blindly.
        let written = cluster
            .patch_node(&patch)
            .await
            .map_err(UndoError::Uncordon)?;
        let restore = decisions::restore(&node, Undoer::Sweep);
        announce(ctx, &node.uid, restore, node.unschedulable, &written).await;
    }
    if let Some(lease) = ours {
        match cluster.delete_lease(lease).await {
            Ok(()) | Err(ClusterError::NotFound(_)) => {}
            Err(error) => return Err(UndoError::Release(ReleaseError::Delete(error))),
        }
    }
    Ok(Outcome::Restored)
}
