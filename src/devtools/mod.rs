//! Development tools, kept out of the production build: `nmo demo`, `nmo bench` and `nmo sim`,
//! all three built on the simulated API server (crate `nmo-sim`). They exist only with the
//! cargo feature `devtools` (on by default, so `cargo run -- demo` works); the image is built
//! with `--no-default-features`, so the binary that cordons production nodes ships no fake API
//! server.

pub mod bench;
mod command;
pub mod demo;

pub use command::{DevCommand, DevError, run};
