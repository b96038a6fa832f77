//! The one integration test binary (each test binary is large and slow to link).

mod crd;
mod manifests;
mod obs_support;
mod otlp_receiver;
mod sim;
mod traces;
