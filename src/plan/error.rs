//! Why `nmo plan` could not make a plan.

use std::time::Duration;

/// Why no plan could be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Neither a node nor a selector matching one.
    #[error("no node to plan for: name at least one node, or give a --selector that matches some")]
    NoNodes,
    /// The cluster could not be reached.
    #[error(transparent)]
    Access(#[from] crate::cli::cluster_access::ClusterAccessError),
    /// A read failed.
    #[error("cannot {what}: {source}")]
    Read {
        /// What was read.
        what: String,
        /// Why it failed.
        #[source]
        source: kube::Error,
    },
    /// A read took too long.
    #[error("cannot {what}: no answer within {after:?}")]
    Timeout {
        /// What was read.
        what: String,
        /// The deadline.
        after: Duration,
    },
    /// The JSON output could not be made.
    #[error("cannot write JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// Standard output could not be written.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}
