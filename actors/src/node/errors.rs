//! Why a node actor's cluster work failed. Each `Display` is the text the status (`lastError`)
//! and the events show, word for word what NMO users see; the API's own error follows a colon.

use chrono::{DateTime, Utc};

use crate::model::NodeName;
use crate::observe::LeaseResult;
use crate::ports::ClusterError;

/// Taking or keeping the node lease failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    /// Someone else holds a valid lease.
    #[error("lease taken by {holder}")]
    TakenBy {
        /// Their holder identity.
        holder: String,
        /// When their lease expires, if known.
        until: Option<DateTime<Utc>>,
    },
    /// The API refused or failed taking the lease.
    #[error("cannot take lease: {0}")]
    Take(#[source] ClusterError),
    /// The API refused or failed renewing the lease.
    #[error("cannot renew lease: {0}")]
    Renew(#[source] ClusterError),
}

impl LeaseError {
    /// How the lease operation ended, for the metric.
    pub fn result(&self) -> LeaseResult {
        match self {
            LeaseError::TakenBy { .. } => LeaseResult::HeldByOther,
            LeaseError::Take(err) | LeaseError::Renew(err) => match err {
                ClusterError::Conflict(_) | ClusterError::AlreadyExists(_) => LeaseResult::Conflict,
                _ => LeaseResult::Error,
            },
        }
    }
}

/// The maintenance gave up after losing the lease too often (`errorOnLeaseCount` above 3).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to extend lease owned by us: {0}")]
pub struct LeaseLost(#[source] pub LeaseError);

impl LeaseLost {
    /// How its text (the status's `lastError`) begins.
    pub const PREFIX: &str = "failed to extend lease owned by us";
}

/// A start-up or repair sequence (finalizer, counts, node, lease, cordon) stopped short.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReconcileError {
    /// Re-reading the NodeMaintenance failed.
    #[error("cannot read NodeMaintenance: {0}")]
    ReadMaintenance(#[source] ClusterError),
    /// Adding the finalizer failed.
    #[error("cannot add finalizer: {0}")]
    AddFinalizer(#[source] ClusterError),
    /// Listing the node's pods (for the first counts) failed.
    #[error("cannot list pods: {0}")]
    ListPods(#[source] ClusterError),
    /// Reading the node failed.
    #[error("cannot read node: {0}")]
    ReadNode(#[source] ClusterError),
    /// The node does not exist: the maintenance fails (retried when its spec changes).
    #[error("node {node} not found")]
    NodeMissing {
        /// The node's name.
        node: NodeName,
    },
    /// The lease is someone else's, or could not be taken.
    #[error(transparent)]
    Lease(#[from] LeaseError),
    /// Labelling, tainting and cordoning the node failed.
    #[error("cannot cordon node: {0}")]
    Cordon(#[source] ClusterError),
}

/// A drain pass could not do everything it meant to (its errors fill `lastError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrainError {
    /// Listing the node's pods failed.
    #[error("cannot list pods: {0}")]
    ListPods(#[source] ClusterError),
    /// Whether a pod's DaemonSet exists is unknown (the pod is left alone meanwhile).
    #[error("cannot look up DaemonSet {namespace}/{name}: {source}")]
    LookUpDaemonSet {
        /// The DaemonSet's namespace.
        namespace: String,
        /// The DaemonSet's name.
        name: String,
        /// What the API said.
        #[source]
        source: ClusterError,
    },
    /// Deleting a finished or orphaned pod failed.
    #[error("cannot delete pod {namespace}/{name}: {source}")]
    DeletePod {
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        name: String,
        /// What the API said.
        #[source]
        source: ClusterError,
    },
}

/// Releasing the node lease at the end failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReleaseError {
    /// Reading the lease failed.
    #[error("cannot read lease: {0}")]
    Read(#[source] ClusterError),
    /// Deleting the lease failed.
    #[error("cannot delete lease: {0}")]
    Delete(#[source] ClusterError),
    /// The lease changed under every attempt.
    #[error("lease kept changing while being released")]
    KeptChanging,
}

impl ReleaseError {
    /// How the release ended, for the metric.
    pub fn result(&self) -> LeaseResult {
        match self {
            ReleaseError::Read(_) | ReleaseError::Delete(_) => LeaseResult::Error,
            ReleaseError::KeptChanging => LeaseResult::Conflict,
        }
    }
}

/// Taking the node out of maintenance stopped short (retried on the next tick).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UndoError {
    /// Reading the node failed.
    #[error("cannot read node: {0}")]
    ReadNode(#[source] ClusterError),
    /// Removing label, taints and cordon failed.
    #[error("cannot uncordon node: {0}")]
    Uncordon(#[source] ClusterError),
    /// Releasing the lease failed.
    #[error(transparent)]
    Release(#[from] ReleaseError),
    /// Removing the finalizer failed.
    #[error("cannot remove finalizer: {0}")]
    RemoveFinalizer(#[source] ClusterError),
    /// Listing the NodeMaintenances (the orphan sweep's second look) failed.
    #[error("cannot list NodeMaintenances: {0}")]
    ListMaintenances(#[source] ClusterError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api() -> ClusterError {
        ClusterError::Transient("etcd timeout".into())
    }

    #[test]
    fn the_status_texts_are_nmos() {
        assert_eq!(
            LeaseError::TakenBy {
                holder: "node-healthcheck".into(),
                until: None
            }
            .to_string(),
            "lease taken by node-healthcheck"
        );
        assert_eq!(
            LeaseLost(LeaseError::Renew(api())).to_string(),
            "failed to extend lease owned by us: cannot renew lease: transient: etcd timeout"
        );
        assert_eq!(
            ReconcileError::from(LeaseError::Take(api())).to_string(),
            "cannot take lease: transient: etcd timeout"
        );
        assert_eq!(
            ReconcileError::NodeMissing { node: "n1".into() }.to_string(),
            "node n1 not found"
        );
        assert_eq!(
            DrainError::DeletePod {
                namespace: "app".into(),
                name: "job".into(),
                source: api()
            }
            .to_string(),
            "cannot delete pod app/job: transient: etcd timeout"
        );
        assert_eq!(
            UndoError::from(ReleaseError::KeptChanging).to_string(),
            "lease kept changing while being released"
        );
    }

    #[test]
    fn lease_failures_are_counted_by_kind() {
        let conflict = LeaseError::Take(ClusterError::AlreadyExists("node-n1".into()));
        assert_eq!(conflict.result(), LeaseResult::Conflict);
        assert_eq!(LeaseError::Renew(api()).result(), LeaseResult::Error);
        assert_eq!(ReleaseError::KeptChanging.result(), LeaseResult::Conflict);
    }
}
