//! nmo: a Kubernetes node maintenance operator, drop-in compatible with the medik8s
//! Node Maintenance Operator.

pub mod cluster;
pub mod crd;
pub mod sim;
pub mod webhook;
