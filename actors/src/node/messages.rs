//! A node actor's messages: what the supervisor, the watches, the timers (one [`NodeMsg::Wake`]
//! for all of them) and the actor's own spawned work tell it. The eviction actor answers with
//! an [`EvictionReport`], which becomes [`NodeMsg::Eviction`] (so the eviction actor needs no
//! knowledge of this enum).

use crate::eviction::EvictionReport;
use crate::model::{Lease, Maintenance, MaintenanceStatus, NodeState, PodList, VmList};
use crate::ports::ClusterError;

use super::errors::LeaseError;
use super::ops::OpResult;

/// Which watch of a node actor ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchKind {
    /// The Node watch.
    Node,
    /// The node's pods watch.
    Pods,
    /// The node lease's watch.
    Lease,
    /// The watch of the node's KubeVirt VMIs (while launcher pods are drained).
    Vms,
}

/// What a node actor's timer wakes it for. Each kind has at most one timer pending (see
/// `timers::Timers`); a watch re-subscribes on a timer of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Wake {
    /// Retry timer: re-check whatever is unfinished.
    Tick,
    /// A failing step's backoff (or a paced start-up's wait) is over: try again.
    RetryDue,
    /// Lease renewal timer.
    RenewLease,
    /// A failed lease renewal is tried again.
    RetryRenewal,
    /// nmo's node lease is about to expire: evictions pause until it is renewed.
    LeaseExpiring,
    /// A deferred status write is due (writes are coalesced, see `Config::status_coalesce`
    /// and `Config::progress_coalesce`).
    FlushStatus,
    /// Re-subscribe a watch that ended.
    Resubscribe(WatchKind),
    /// `spec.drainTimeout` may have passed.
    DrainDeadline,
}

/// Messages to a node actor.
#[derive(Debug)]
pub enum NodeMsg {
    /// The NodeMaintenance changed (from the supervisor).
    Update(Box<Maintenance>),
    /// The NodeMaintenance is gone from the API before our undo finished (its finalizer was
    /// removed by hand): finish the undo.
    Gone,
    /// The Node changed (None = it does not exist).
    NodeChanged(Option<NodeState>),
    /// The node's pods changed (complete list).
    PodsChanged(PodList),
    /// The node lease changed (None = it does not exist).
    LeaseChanged(Option<Lease>),
    /// The node's KubeVirt VMIs changed (complete list).
    VmsChanged(VmList),
    /// A watch stream ended; re-subscribe later.
    WatchEnded(WatchKind),
    /// Internal: one of the actor's timers fired (see `timers`).
    Wake(Wake),
    /// Internal: a spawned operation finished.
    Op(OpResult),
    /// Internal: the status write finished.
    StatusWritten(StatusOutcome),
    /// Internal: a lease renewal finished.
    LeaseRenewed(Result<Lease, LeaseError>),
    /// An eviction outcome from the eviction actor.
    Eviction(EvictionReport),
}

impl crate::timers::WakeMsg for NodeMsg {
    type Wake = Wake;

    fn wake(wake: Wake) -> Self {
        NodeMsg::Wake(wake)
    }

    #[cfg(test)]
    fn into_wake(self) -> Option<Wake> {
        match self {
            NodeMsg::Wake(wake) => Some(wake),
            _ => None,
        }
    }
}

impl From<EvictionReport> for NodeMsg {
    fn from(report: EvictionReport) -> Self {
        NodeMsg::Eviction(report)
    }
}

/// The way back for a report the node actor could not receive (ractor's
/// [`ractor::DerivedActorRef`] hands an undelivered message back in its own type).
impl TryFrom<NodeMsg> for EvictionReport {
    type Error = NodeMsg;

    fn try_from(msg: NodeMsg) -> Result<Self, Self::Error> {
        match msg {
            NodeMsg::Eviction(report) => Ok(report),
            other => Err(other),
        }
    }
}

/// How a status write ended.
#[derive(Debug)]
pub enum StatusOutcome {
    /// The API has this status now.
    Written(MaintenanceStatus),
    /// Refused: the status had changed since it was seen. It is as read afterwards (None:
    /// the object has no status).
    Refused(Option<MaintenanceStatus>),
    /// The NodeMaintenance is gone (or is another object of the same name).
    Gone,
    /// Failed; whether it landed is unknown.
    Failed(ClusterError),
}
