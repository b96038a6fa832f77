//! nmo: a Kubernetes node maintenance operator, drop-in compatible with the medik8s
//! Node Maintenance Operator.

pub mod api_client;
pub mod build_info;
pub mod cli;
pub mod cluster;
pub mod coexistence;
pub mod controller;
pub mod crd;
pub mod drain_timeout;
pub mod leader;
pub mod maintenance_watch;
pub mod observability;
pub mod operator;
pub mod options;
pub mod plan;
pub mod rbac_check;
pub mod servers;
pub mod serving;
pub mod serving_cert;
pub mod spec_checks;
pub mod stopping;
pub mod uninstall;
pub mod webhook;
