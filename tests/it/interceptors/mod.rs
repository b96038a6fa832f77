//! Drains of workloads that act on eviction requests, emulated from what their projects
//! document, against nmo through the real API server's own admission webhooks (the tests run an
//! HTTPS webhook of their own on `pods/eviction`, `https`):
//! - `kubevirt`: KubeVirt's virt-api webhook and migration controller;
//! - `strimzi`: Strimzi's Drain Cleaner and the Strimzi Cluster Operator's rolling restart.
//!
//! `pods` watches what happens to the workload's pods (who deleted which, while it ran).

mod https;
mod kubevirt;
mod pods;
mod strimzi;
