//! The harness against the real binaries: one test binary, one shared control plane for the
//! tests that only need a cluster, and control planes of their own for those about start,
//! failure and clean-up.

mod cleanup;
mod clients;
mod controllers;
mod faults;
mod manifests;
mod start_errors;
mod support;
