//! The supervisor's node actors: one per NodeMaintenance uid, by actor id as well (the
//! supervision events name the actor), and those stopped on purpose. Changed only here.

use std::collections::{HashMap, HashSet};

use ractor::{ActorId, ActorRef};
use tokio::time::Instant;

use crate::model::{MaintenanceName, NodeName, Uid};
use crate::node::NodeMsg;
use crate::stop::StopReason;

/// One running node actor.
pub(super) struct Child {
    pub(super) actor: ActorRef<NodeMsg>,
    pub(super) name: MaintenanceName,
    pub(super) node: NodeName,
    pub(super) started: Instant,
}

/// The node actors, by NodeMaintenance uid.
#[derive(Default)]
pub(super) struct Children {
    by_uid: HashMap<Uid, Child>,
    by_id: HashMap<ActorId, Uid>,
    /// Node actors stopped on purpose (their termination needs no reaction).
    superseded: HashSet<ActorId>,
}

impl Children {
    /// The node actor of NodeMaintenance `uid` (named `name`, on `node`) started.
    pub(super) fn started(
        &mut self,
        uid: Uid,
        actor: ActorRef<NodeMsg>,
        name: MaintenanceName,
        node: NodeName,
    ) {
        self.by_id.insert(actor.get_id(), uid.clone());
        self.by_uid.insert(
            uid,
            Child {
                actor,
                name,
                node,
                started: Instant::now(),
            },
        );
    }

    /// The node actor of `uid`, if one runs.
    pub(super) fn get(&self, uid: &Uid) -> Option<&Child> {
        self.by_uid.get(uid)
    }

    /// Whether a node actor runs for `uid`.
    pub(super) fn runs(&self, uid: &Uid) -> bool {
        self.by_uid.contains_key(uid)
    }

    /// The uids with a node actor.
    pub(super) fn uids(&self) -> impl Iterator<Item = &Uid> {
        self.by_uid.keys()
    }

    /// Every node actor.
    pub(super) fn all(&self) -> impl Iterator<Item = &Child> {
        self.by_uid.values()
    }

    /// Node actors running.
    pub(super) fn len(&self) -> usize {
        self.by_uid.len()
    }

    /// The node actor of `uid` is stopped on purpose (another NodeMaintenance drives its node):
    /// its end needs no reaction. False when none ran.
    pub(super) fn supersede(&mut self, uid: &Uid) -> bool {
        let Some(child) = self.by_uid.remove(uid) else {
            return false;
        };
        self.superseded.insert(child.actor.get_id());
        child.actor.stop(StopReason::Superseded.text());
        true
    }

    /// The actor `id` ended: its uid and what it was, unless it is not one of ours or was
    /// stopped on purpose.
    pub(super) fn ended(&mut self, id: &ActorId) -> Option<(Uid, Child)> {
        let uid = self.by_id.remove(id)?;
        if self.superseded.remove(id) {
            return None;
        }
        let child = self.by_uid.remove(&uid)?;
        Some((uid, child))
    }
}
