//! Uninstalling nmo, on a real kube-apiserver with its controller manager (the namespace
//! controller and the garbage collector do what they do in a cluster): removing the install in
//! the wrong order strands no node, and `nmo uninstall` gives every node back and removes nmo.
//!
//! `manifests` checks, without a cluster, that `nmo uninstall` knows every object of every
//! install deploy/ makes. The other tests share a control plane of their own, one test at a time (deleting the CRD would
//! pull it from under the other end-to-end tests); each applies the release manifest and runs
//! nmo in-process as its ServiceAccount with a real bound token (so the ServiceAccount's
//! deletion matters, as it does to a pod).

mod command;
mod handover;
pub mod installed;
mod manifests;
mod wrong_order;
