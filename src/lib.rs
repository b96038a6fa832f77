//! nmo: a Kubernetes node maintenance operator, drop-in compatible with the medik8s
//! Node Maintenance Operator.

pub mod api_metrics;
pub mod cluster;
pub mod controller;
pub mod crd;
#[cfg(feature = "devtools")]
pub mod devtools;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod operator;
pub mod operator_metrics;
pub mod telemetry;
pub mod webhook;
