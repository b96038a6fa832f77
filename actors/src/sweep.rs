//! The orphan sweep: nodes nmo changed (its record, or the drain taint of an operator that
//! kept none) and leases it holds, for which no NodeMaintenance exists any more, e.g. because
//! someone removed the finalizer while nmo was down. They are undone as their record says.
//!
//! Run by the supervisor at start and after every relist of the NodeMaintenances. A node is
//! only ever an orphan when NO NodeMaintenance targets it: the Go operator (which must not run
//! alongside nmo, but might) marks and leases nodes under the same names, and a node of a live
//! NodeMaintenance is its driver's business whoever drives it. The NodeMaintenances are listed
//! fresh, after the marked nodes and the leases were read: a maintenance marks its node only
//! after it exists, so one that marked a node read here is in that list unless it is gone.
//! Other medik8s operators' leases (holder `node-healthcheck`, ...) are never touched, and a
//! node whose lease another operator validly holds keeps its cordon (see
//! [`crate::decisions::undo_patch`]).

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::config::Config;
use crate::decisions::{self, Undoer};
use crate::node::UndoError;
use crate::node::ops::{Known, OpCtx, restore};
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
    pub restored: Vec<String>,
    /// Nodes whose undo failed (tried again by the next sweep).
    pub failed: Vec<(String, UndoError)>,
}

/// Finds orphans and undoes them; `driven` are the nodes the supervisor's node actors drive
/// (their NodeMaintenance may already be gone while their undo finishes).
pub(crate) async fn sweep(
    cluster: Arc<dyn Cluster>,
    config: Arc<Config>,
    driven: HashSet<String>,
) -> Result<SweepReport, SweepError> {
    let marked = cluster
        .list_maintained_nodes()
        .await
        .map_err(SweepError::ListNodes)?;
    let leases = cluster
        .list_leases(&config.lease_namespace)
        .await
        .map_err(SweepError::ListLeases)?;
    let mut suspects: BTreeSet<String> = marked
        .iter()
        .filter(|node| decisions::marked_by(node, Undoer::Sweep))
        .map(|node| node.name.clone())
        .collect();
    suspects.extend(
        leases
            .iter()
            .filter(|lease| decisions::lease_is_ours(lease))
            .filter_map(|lease| lease.name.strip_prefix("node-").map(str::to_string)),
    );
    if suspects.is_empty() {
        return Ok(SweepReport::default());
    }
    let targeted: HashSet<String> = cluster
        .list_maintenances()
        .await
        .map_err(SweepError::ListMaintenances)?
        .into_iter()
        .map(|nm| nm.node_name)
        .collect();
    let mut report = SweepReport::default();
    for node in suspects {
        if targeted.contains(&node) || driven.contains(&node) {
            continue;
        }
        tracing::warn!(%node, "node changed or leased by nmo for a NodeMaintenance that no longer exists; undoing");
        let ctx = OpCtx {
            cluster: cluster.clone(),
            config: config.clone(),
            nm_name: String::new(),
            nm_uid: String::new(),
            node_name: node.clone(),
            deleting: Arc::new(AtomicBool::new(true)),
        };
        match restore(&ctx, Undoer::Sweep, Known::default()).await {
            Ok(()) => report.restored.push(node),
            Err(error) => {
                tracing::warn!(%node, %error, "cannot undo an orphaned node, trying again later");
                report.failed.push((node, error));
            }
        }
    }
    Ok(report)
}
