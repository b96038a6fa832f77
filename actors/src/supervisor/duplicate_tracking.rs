//! The supervisor's side of duplicate NodeMaintenances (decided in [`super::duplicate_decision`]): each
//! duplicate's latest version, and its Failed status or finalizer release carried out through
//! its own op runner, never two at once.

use ractor::ActorRef;

use super::duplicate_decision::{self, DuplicateAction, DuplicateError};
use super::messages::SupervisorMsg;
use super::state::SupervisorState;
use crate::model::{Maintenance, MaintenanceName, Uid};

impl SupervisorState {
    /// `nm` is a duplicate of `active`: mark it Failed, or release its finalizer when deleted.
    pub(super) fn duplicate(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        nm: Maintenance,
        active: MaintenanceName,
    ) {
        let uid = nm.uid.clone();
        // A duplicate never drives its node, so it never waits for the budget either.
        self.dequeue(&uid);
        let duplicate = self.duplicates.seen(uid.clone(), nm, active);
        if duplicate.ops.may_start() {
            self.handle_duplicate(myself, &uid);
        }
    }

    /// Runs what a duplicate calls for, if anything.
    pub(super) fn handle_duplicate(&mut self, myself: &ActorRef<SupervisorMsg>, uid: &Uid) {
        let now = self.config.now();
        let Some(duplicate) = self.duplicates.get_mut(uid) else {
            return;
        };
        let action = duplicate_decision::decide(&duplicate.latest, &duplicate.active, now);
        if action == DuplicateAction::Nothing {
            return;
        }
        let work =
            duplicate_decision::carry_out(self.cluster.clone(), duplicate.latest.clone(), action);
        let uid = uid.clone();
        duplicate.ops.run(
            &mut self.tasks,
            myself,
            tracing::Span::none(),
            work,
            move |result| SupervisorMsg::DuplicateHandled { uid, result },
        );
    }

    pub(super) fn duplicate_handled(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        uid: &Uid,
        result: Result<(), DuplicateError>,
    ) {
        let Some(duplicate) = self.duplicates.get_mut(uid) else {
            return; // deleted meanwhile
        };
        if let Err(err) = result {
            tracing::warn!(maintenance = %duplicate.latest.name, error = %err, "cannot handle duplicate NodeMaintenance");
        }
        duplicate.ops.finished();
        if duplicate.ops.take_again() {
            self.handle_duplicate(myself, uid);
        }
    }
}
