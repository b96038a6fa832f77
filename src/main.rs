//! The `nmo` command line: the operator's binary, the one the image ships. Its commands are in
//! the library (`nmo::cli::commands`), which `nmo-dev` (crate `nmo-devtools`) runs too.

use std::process::ExitCode;

/// jemalloc instead of glibc's malloc: at 500 drains at once glibc's malloc took 43% of nmo's
/// CPU (`perf` at b2000: `_int_malloc`, `malloc_consolidate`, `unlink_chunk`, `free`), a share
/// that grew with the heap. Its options are built in (`.cargo/config.toml`).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    nmo::cli::commands::main()
}
