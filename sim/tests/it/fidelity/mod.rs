//! Differential fidelity: the same requests sent to the simulator and to a real kube-apiserver
//! (v1.36, from `KUBEBUILDER_ASSETS`), comparing status codes, `Status` bodies (reason,
//! message, details and causes) and the resulting objects, modulo what a server generates
//! (uids, resourceVersions, timestamps, managedFields). Each case is its own test, so a
//! difference reads as the name of what differs. A difference the simulator keeps on purpose
//! is accepted by the case with `.known(pointer, why)` and listed in nmo-sim's crate docs
//! ("Where it is NOT faithful").
//!
//! Every verb and subresource nmo and kubectl use: `crud` (get, create, update and their
//! errors), `lists` (label and field selectors, resourceVersions, pages), `watches`
//! (selectors, resourceVersions, 410 Gone), `patches` (JSON with `test` ops, merge,
//! strategic), `evictions` (budgets allowing and refusing, several budgets), `deletion`
//! (finalizers, graceful deletion of pods, preconditions), `leases` (updates with
//! resourceVersion preconditions), `events` (core/v1 and events.k8s.io/v1), `status` (the
//! subresource), `crd` (NodeMaintenance validation).

mod crd;
mod crud;
mod deletion;
mod events;
mod evictions;
mod fixtures;
mod harness;
mod leases;
mod lists;
mod patches;
mod status;
mod watches;
