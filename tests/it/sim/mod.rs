//! Conformance tests of the simulated API server.

mod cluster;
mod common;
mod crud;
mod events;
mod eviction;
mod hooks;
mod kubectl;
mod misc;
mod patch;
mod scale;
mod watch;
