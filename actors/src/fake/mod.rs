//! An in-memory [`Cluster`](crate::ports::Cluster) for tests: nodes, pods, leases, NodeMaintenances, DaemonSets and
//! events, with every call recorded and scriptable outcomes (errors per operation, eviction
//! outcomes per pod, PodDisruptionBudgets that refuse evictions).
//!
//! It also plays the controller's watch: [`FakeCluster::subscribe_maintenances`] yields every
//! NodeMaintenance change, and [`Harness`] feeds them to a running actor system the way the
//! real controller does. `fixtures` builds the objects tests put into it, and [`Scenario`] a
//! test's start (the cluster, the configuration, the NodeMaintenances created once the actors
//! run) in one expression.

mod cluster;
mod fixtures;
mod harness;
mod objects;
mod port;
mod scenario;

pub use cluster::{FakeCluster, MaintenanceChange};
pub use fixtures::{at, foreign_lease, t0};
pub use harness::{Harness, eventually, feed, paused_config};
pub use scenario::Scenario;
