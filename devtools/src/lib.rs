//! nmo's development tools, a crate of their own so that the operator links none of them:
//! `demo`, `bench` and `sim`, all three built on the simulated API server (crate `nmo-sim`).
//! Its binary `nmo-dev` is `nmo` with these three subcommands added (`cargo run` at the
//! workspace's root runs it, so `cargo run -- demo` works); the image ships the `nmo` package's
//! binary, so the binary that cordons production nodes ships no fake API server.

pub mod bench;
pub mod cli;
mod command;
pub mod demo;

pub use command::{DevCommand, DevError, run};
