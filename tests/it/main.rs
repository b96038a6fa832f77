//! The one integration test binary (each test binary is large and slow to link).

mod crd;
mod manifests;
mod sim;
mod webhook;
