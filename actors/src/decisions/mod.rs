//! Pure decisions: the actors ask these functions what to do, then do it. Nothing here touches
//! the cluster or the clock (time is always passed in).

mod node;
mod node_lease;
mod pods;
mod record;
mod status;

pub use node::{
    maintenance_patch, maintenance_taints, marked_by, node_in_maintenance, undo_patch,
    with_maintenance_taints, without_maintenance_taints,
};
pub use node_lease::{
    LeaseAction, LeaseFailure, MAX_CLOCK_SKEW, MAX_LEASE_ERRORS, eviction_pause_margin,
    held_by_other, lease_expiry, lease_failure, lease_is_ours, lease_name, lease_valid, plan_lease,
    renewed_bogusly_ahead,
};
pub use pods::{
    DaemonSetRef, PodAction, SkipReason, classify, daemonset_of, daemonset_ref, progress,
};
pub use record::{Claim, PriorState, RecordFinding, Restore, Undoer, claim, record_of, restore};
pub use status::{condition, driver, set_condition, status_differs};
