//! The supervisor's messages.

use ractor::RpcReplyPort;

use super::duplicate::DuplicateError;
use crate::model::{Maintenance, NodeSummaryEvent};
use crate::ports::ClusterError;

/// Messages to the supervisor. The controller sends `Upsert` for every NodeMaintenance it sees
/// (create, change, relist) and `Deleted` when one is gone from the API.
#[derive(Debug)]
pub enum SupervisorMsg {
    /// The current state of a NodeMaintenance (created, changed, or seen again in a relist).
    Upsert(Box<Maintenance>),
    /// The NodeMaintenance no longer exists in the API.
    Deleted {
        /// `metadata.name`.
        name: String,
    },
    /// Every NodeMaintenance that existed when the watch (re)listed has been sent: the
    /// cluster maintenance budget knows who holds a slot and may let others start.
    Listed,
    /// Names of the NodeMaintenances that have a live node actor (introspection, tests).
    Active(RpcReplyPort<Vec<String>>),
    /// Names of the NodeMaintenances waiting for the budget, in queue order (introspection,
    /// tests).
    Queue(RpcReplyPort<Vec<String>>),
    /// Internal: a change in the cluster's nodes (only while a budget counts them).
    Nodes(NodeSummaryEvent),
    /// Internal: the status write (and first event) of a waiting NodeMaintenance ended.
    QueueWritten {
        /// The NodeMaintenance.
        name: String,
        /// Ok, or what failed (tried again on the next budget tick).
        result: Result<(), ClusterError>,
    },
    /// Internal: the budget's timer (queue places written, failed writes retried).
    FleetTick,
    /// Internal: respawn the node actor of this NodeMaintenance after a crash.
    Respawn(String),
    /// Internal: the cluster calls for a duplicate NodeMaintenance finished.
    DuplicateHandled {
        /// The duplicate's name.
        name: String,
        /// Ok, or what failed.
        result: Result<(), DuplicateError>,
    },
}
