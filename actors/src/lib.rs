//! nmo's maintenance logic: a supervisor keeps one node actor per NodeMaintenance, every eviction
//! goes through one shared eviction actor, and all decisions are pure functions in [`decisions`].
//! Kubernetes is reached only through the [`ports::Cluster`] trait, so this crate knows no
//! Kubernetes client.

pub mod call_deadline;
pub mod config;
pub mod decisions;
pub mod diagnosis;
pub mod eviction;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
pub mod fleet;
pub mod interception;
pub mod model;
pub mod node;
pub mod observe;
mod op_runner;
pub mod pdb;
pub mod ports;
pub mod progress_pace;
pub mod retry;
pub mod stop;
pub mod supervisor;
pub mod sweep;
pub mod system;
mod task;
mod timers;

pub use config::{Clock, Config, SystemClock, TokioClock};
pub use observe::Observer;
pub use supervisor::SupervisorMsg;
pub use system::{ActorSystem, StartError, start};

#[cfg(test)]
mod tests;
