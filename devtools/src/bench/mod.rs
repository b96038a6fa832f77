//! Benchmarks of concurrent drains (`nmo bench`, `cargo bench --bench drain`): `nmo run` in a
//! child whose memory and CPU are read from /proc, against the simulated cluster in the
//! benchmark's process (which counts the operator's requests under its own user) or, with
//! `--backend real`, a real control plane (`real`: its audit log counts them).

pub mod cli;
pub mod error;
pub mod figures;
pub mod fleet;
pub mod floor;
pub mod interactions;
pub mod pdb_clock;
pub mod policy;
pub mod process;
pub mod procstat;
pub mod real;
pub mod real_figures;
pub mod report;
pub mod result;
pub mod run;
pub mod scenario;
pub mod server_cost;
pub mod soak;
pub mod vms;
