//! The cluster maintenance budget: how many NodeMaintenances may drive nodes at once
//! (`--max-parallel-maintenances`) and how many nodes may be out of service at once, whoever
//! took them out (`--max-unavailable-nodes`). The rest wait, oldest first, touching nothing.
//!
//! Everything here is pure: the budget and its parsing (`limits`), the compact view of the
//! cluster's nodes it counts with (`nodes`), the decision of who starts and who waits where
//! (`admission`), and what a waiting maintenance's status says (`queue_status`). The
//! supervisor feeds these and acts on their answers.
//!
//! What holds a slot is derived from the cluster, never from memory, so a restart or a new
//! leader comes to the same answer: a maintenance holds a slot once it carries nmo's finalizer
//! (the node actor adds it before it touches the node, and a waiting maintenance has none)
//! and is not Failed; it keeps the slot while Succeeded and while its undo runs.

mod admission;
mod limits;
mod nodes;
mod queue_status;

pub use admission::{Candidate, Decision, WaitReason, Waiting, decide};
pub use limits::{FleetBudget, Limit, LimitError};
pub use nodes::NodeView;
pub use queue_status::{awaiting_start, mark_queued, mark_started};
