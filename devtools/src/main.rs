//! `nmo-dev`: `nmo` with the development tools. Every operator command (`run`, `crd`, `plan`,
//! none) runs as in `nmo`, through the library's `nmo::cli::commands`; `demo`, `bench` and
//! `sim` are added (the command line is `nmo_devtools::cli`). `cargo run` at the workspace's
//! root runs this binary, so the README's `cargo run --release -- demo` and
//! `cargo run -- run ...` both work; the image ships `nmo`.

use std::process::ExitCode;

use nmo::cli::commands::{self, exit_code, parse_command_line};
use nmo_devtools::cli::{Cli, Command};

/// The same allocator as `nmo` (see src/main.rs): the demo runs the operator in this process
/// and `nmo bench` may run this binary as the operator.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli: Cli = parse_command_line();
    match cli.command {
        Some(Command::Dev(command)) => exit_code(run_dev(command)),
        Some(Command::Operator(command)) => exit_code(commands::dispatch(Some(command), cli.run)),
        None => exit_code(commands::dispatch(None, cli.run)),
    }
}

fn run_dev(command: nmo_devtools::DevCommand) -> Result<ExitCode, nmo_devtools::DevError> {
    commands::runtime()?.block_on(nmo_devtools::run(command))?;
    Ok(ExitCode::SUCCESS)
}
