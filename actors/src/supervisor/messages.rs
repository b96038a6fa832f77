//! The supervisor's messages.

use ractor::RpcReplyPort;

use super::duplicate_decision::DuplicateError;
use crate::model::{Maintenance, MaintenanceName, NodeSummaryEvent, Uid};
use crate::ports::ClusterError;

/// How many entries the supervisor keeps, per kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Remembered {
    /// NodeMaintenances known to exist.
    pub known: usize,
    /// Node actors.
    pub children: usize,
    /// Nodes with a driver.
    pub drivers: usize,
    /// Duplicates.
    pub duplicates: usize,
    /// Undone NodeMaintenances whose deletion is still to arrive.
    pub finished: usize,
    /// Crash counts kept for respawn backoff.
    pub crashes: usize,
}
use crate::sweep::{SweepError, SweepReport};

/// What the supervisor's timers wake it for. Each value has at most one timer pending (see
/// `crate::timers::Timers`): each crashed node actor's respawn has a timer of its own.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Wake {
    /// Look again for nodes nmo changed for NodeMaintenances that no longer exist, after a
    /// sweep that failed (a sweep also follows every listing, see `SupervisorMsg::Listed`).
    Sweep,
    /// The budget's tick (queue places written, failed writes retried).
    FleetTick,
    /// Respawn the node actor of this NodeMaintenance (uid) after a crash.
    Respawn(Uid),
}

impl crate::timers::WakeMsg for SupervisorMsg {
    type Wake = Wake;

    fn wake(wake: Wake) -> Self {
        SupervisorMsg::Wake(wake)
    }

    #[cfg(test)]
    fn into_wake(self) -> Option<Wake> {
        match self {
            SupervisorMsg::Wake(wake) => Some(wake),
            _ => None,
        }
    }
}

/// Messages to the supervisor. The controller sends `Upsert` for every NodeMaintenance it sees
/// (create, change, relist) and `Deleted` when one is gone from the API.
#[derive(Debug)]
pub enum SupervisorMsg {
    /// The current state of a NodeMaintenance (created, changed, or seen again in a relist).
    Upsert(Box<Maintenance>),
    /// The NodeMaintenance no longer exists in the API.
    Deleted {
        /// `metadata.name`.
        name: MaintenanceName,
        /// `metadata.uid`: a NodeMaintenance created again under the same name is another one.
        uid: Uid,
    },
    /// Every NodeMaintenance that existed when the watch (re)listed has been sent: the
    /// cluster maintenance budget knows who holds a slot and may let others start, and the
    /// orphan sweep looks for nodes changed for NodeMaintenances that no longer exist.
    Listed,
    /// How much the supervisor remembers (introspection, tests: nothing may grow without
    /// bound over a long run).
    Remembered(RpcReplyPort<Remembered>),
    /// Names of the NodeMaintenances that have a live node actor (introspection, tests).
    Active(RpcReplyPort<Vec<String>>),
    /// Names of the NodeMaintenances waiting for the budget, in queue order (introspection,
    /// tests).
    Queue(RpcReplyPort<Vec<String>>),
    /// Internal: a change in the cluster's nodes (only while a budget counts them).
    Nodes(NodeSummaryEvent),
    /// Internal: the status write (and first event) of a waiting NodeMaintenance ended.
    QueueWritten {
        /// The NodeMaintenance's uid.
        uid: Uid,
        /// Ok, or what failed (tried again on the next budget tick).
        result: Result<(), ClusterError>,
    },
    /// Internal: one of the supervisor's timers fired (see `crate::timers`).
    Wake(Wake),
    /// Internal: an orphan sweep finished.
    Swept(Result<SweepReport, SweepError>),
    /// Internal: the cluster calls for a duplicate NodeMaintenance finished.
    DuplicateHandled {
        /// The duplicate's uid.
        uid: Uid,
        /// Ok, or what failed.
        result: Result<(), DuplicateError>,
    },
}

impl SupervisorMsg {
    /// Whether the NodeMaintenance watch sends this (`Upsert`, `Deleted`, `Listed`): its work
    /// queue, as the metrics count it.
    pub fn is_from_the_watch(&self) -> bool {
        matches!(
            self,
            SupervisorMsg::Upsert(_) | SupervisorMsg::Deleted { .. } | SupervisorMsg::Listed
        )
    }
}
