//! Benchmarks of concurrent drains against the simulated cluster (`nmo bench`, `cargo bench`).

pub mod procstat;
