//! The fleet benchmark (`nmo bench --scenario fleet`): many NodeMaintenances created at once
//! under a cluster maintenance budget, each deleted by the driver as soon as it succeeds (as
//! an automation would once the node's work is done), so that the queue drains through the
//! budget's slots.
//!
//! Figures: the wall time, the most nodes unavailable at any moment (never above the budget),
//! the time from a slot freeing (a maintenance gone) to the next one starting (its finalizer
//! added), and what each waiting maintenance cost while it waited (status writes and events
//! on it, seen by the driver's watch; nmo opens no watch for it).

mod observer;
pub mod result;
mod run;
pub mod scenario;

pub use run::run;
