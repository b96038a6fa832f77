//! Why a node actor's cluster work failed.

use crate::ports::ClusterError;

/// Why taking or keeping the lease failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseProblem {
    /// Someone else holds a valid lease.
    HeldByOther {
        /// Their holder identity.
        holder: String,
        /// When their lease expires, if known.
        until: Option<chrono::DateTime<chrono::Utc>>,
    },
    /// The API call failed.
    Api(ClusterError),
}
