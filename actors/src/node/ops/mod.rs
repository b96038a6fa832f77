//! The slow work of a node actor: sequences of cluster calls, run by the op runner in tasks of
//! their own whose results come back as messages (so the mailbox, lease ticks included, never
//! waits on the API). Each operation is idempotent and decides from what it reads, never from
//! the actor's memory.
//!
//! Every cluster call goes through [`OpCtx::cluster`]: the one place a deadline per call would
//! wrap the port.

mod ctx;
mod drain_pass;
mod lease_calls;
mod reconcile;
mod undo;

pub(crate) use ctx::{OpCtx, emit, nm_event};
pub use drain_pass::{DaemonSets, DrainPass};
pub(crate) use drain_pass::{classify_known, drain_pass};
pub(crate) use lease_calls::acquire_lease;
pub(crate) use reconcile::{ReconcileInput, reconcile};
pub use reconcile::{ReconcileOutcome, Reconciled};
pub(crate) use undo::{Known, UndoInput, announce, undo};

use super::errors::UndoError;
use crate::observe::OpOutcome;

/// The result of an operation, cast back to the node actor.
#[derive(Debug)]
pub enum OpResult {
    /// Start-up / repair sequence finished.
    Reconciled(Box<Reconciled>),
    /// A drain pass finished.
    Drained(DrainPass),
    /// Undo finished.
    Undone {
        /// The finalizer was part of the undo (deletion), not only the node (failure).
        finalizer: bool,
        /// Ok, or what went wrong (retried on the next tick).
        result: Result<(), UndoError>,
    },
}

impl OpResult {
    /// Whether the operation failed, as the observer counts it.
    pub fn outcome(&self) -> OpOutcome {
        let failed = match self {
            OpResult::Reconciled(done) => done.outcome.is_err(),
            OpResult::Drained(pass) => !pass.errors.is_empty(),
            OpResult::Undone { result, .. } => result.is_err(),
        };
        if failed {
            OpOutcome::Error
        } else {
            OpOutcome::Success
        }
    }
}
