//! Benchmarks of concurrent drains against the simulated cluster (`nmo bench`, `cargo bench
//! --bench drain`): the simulator runs in the benchmark's process, `nmo run` in a child whose
//! memory and CPU are read from /proc, and the simulator counts the operator's requests under
//! its own user.

pub mod budget_clock;
pub mod cli;
pub mod error;
pub mod figures;
pub mod fleet;
pub mod interactions;
pub mod policy;
pub mod process;
pub mod procstat;
pub mod report;
pub mod result;
pub mod run;
pub mod scenario;
pub mod soak;
