//! Conformance tests of the simulated API server: the one integration test binary of nmo-sim
//! (each test binary is large and slow to link).

mod cluster;
mod connections;
mod crud;
mod events;
mod eviction;
mod fidelity;
mod hooks;
mod kubectl;
mod misc;
mod patch;
mod rbac;
mod remote_kubelet;
mod scale;
mod support;
mod watch;
