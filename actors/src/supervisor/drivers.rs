//! Which NodeMaintenance drives each node (kept while its actor restarts, while it waits in
//! the budget's queue, and while it undoes a maintenance already gone from the API). Changed
//! only here.

use std::collections::{HashMap, HashSet};

use crate::model::{NodeName, Uid};

/// Node -> uid of the NodeMaintenance driving it.
#[derive(Default)]
pub(super) struct Drivers(HashMap<NodeName, Uid>);

impl Drivers {
    /// NodeMaintenance `uid` drives `node` from now on.
    pub(super) fn drives(&mut self, node: &NodeName, uid: &Uid) {
        self.0.insert(node.clone(), uid.clone());
    }

    /// The uid driving `node`.
    pub(super) fn of(&self, node: &NodeName) -> Option<&Uid> {
        self.0.get(node)
    }

    /// NodeMaintenance `uid` no longer drives `node` (if another does, it still does).
    pub(super) fn freed(&mut self, node: &NodeName, uid: &Uid) {
        if self.0.get(node) == Some(uid) {
            self.0.remove(node);
        }
    }

    /// The nodes `uid` drives.
    pub(super) fn nodes_of(&self, uid: &Uid) -> Vec<NodeName> {
        self.0
            .iter()
            .filter(|(_, driver)| *driver == uid)
            .map(|(node, _)| node.clone())
            .collect()
    }

    /// Every node driven.
    pub(super) fn nodes(&self) -> HashSet<NodeName> {
        self.0.keys().cloned().collect()
    }

    /// Nodes driven.
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}
