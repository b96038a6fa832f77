//! A Kubernetes Event nmo records.

use super::ids::{MaintenanceName, NodeName, Uid};

/// What an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventTarget {
    /// A NodeMaintenance (kind `NodeMaintenance`, group `nodemaintenance.medik8s.io/v1beta1`).
    Maintenance {
        /// Object name.
        name: MaintenanceName,
        /// Object uid.
        uid: Uid,
    },
    /// A Node (kind `Node`, `v1`).
    Node {
        /// Node name.
        name: NodeName,
        /// Node uid (empty if unknown).
        uid: Uid,
    },
}

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Normal event.
    Normal,
    /// Warning event.
    Warning,
}

/// A Kubernetes event to emit (namespace `default`, like NMO's events for cluster-scoped objects).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The object the event is about.
    pub target: EventTarget,
    /// Normal or Warning.
    pub type_: EventType,
    /// Reason, see [`super::reasons`].
    pub reason: String,
    /// Message.
    pub message: String,
}
