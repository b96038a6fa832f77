//! Why `nmo uninstall` stopped.

use std::time::Duration;

use crate::cli::cluster_access::ClusterAccessError;

/// Why `nmo uninstall` stopped before nmo was removed.
#[derive(Debug, thiserror::Error)]
pub enum UninstallError {
    /// The cluster could not be reached.
    #[error(transparent)]
    Access(#[from] ClusterAccessError),
    /// An API call failed.
    #[error("cannot {what}: {source}")]
    Api {
        /// What the call was for.
        what: String,
        /// Why it failed.
        #[source]
        source: kube::Error,
    },
    /// An API call took too long.
    #[error("cannot {what}: no answer within {after:?}")]
    CallTimeout {
        /// What the call was for.
        what: String,
        /// The deadline.
        after: Duration,
    },
    /// NodeMaintenances were still there at the timeout: nothing of nmo was deleted, so that
    /// nmo can still give their nodes back.
    #[error(
        "nothing of nmo was deleted: {count} NodeMaintenance(s) did not end within {after:?}: \
         {remaining}. {nmo}. Once nmo runs, they end by themselves; then run nmo uninstall again"
    )]
    MaintenancesRemain {
        /// How many.
        count: usize,
        /// Which, on which nodes.
        remaining: String,
        /// What was seen of nmo's Deployment.
        nmo: String,
        /// The timeout.
        after: Duration,
    },
    /// nmo's objects were deleted but some were still there at the timeout.
    #[error(
        "still being deleted after {after:?}: {left}; run nmo uninstall again to wait for them"
    )]
    NotGone {
        /// What is left.
        left: String,
        /// The timeout.
        after: Duration,
    },
    /// OLM manages this nmo: it would put back whatever was deleted.
    #[error(
        "nothing was changed: OLM manages this nmo (ClusterServiceVersion {namespace}/{csv}). \
         Delete the NodeMaintenances and wait until none is left, then delete its Subscription \
         and ClusterServiceVersion"
    )]
    ManagedByOlm {
        /// The ClusterServiceVersion.
        csv: String,
        /// Its namespace.
        namespace: String,
    },
    /// Standard output could not be written.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}
