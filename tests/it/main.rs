//! The one integration test binary (each test binary is large and slow to link).

mod crd;
mod demo;
mod manifests;
mod operator;
mod sim;
mod webhook;
