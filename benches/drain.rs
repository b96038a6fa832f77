//! `cargo bench --bench drain`: the concurrent-drain scenarios of `nmo bench`, with the
//! release `nmo` binary cargo builds alongside as the operator. Prints figures; asserts
//! nothing. Scenarios can be chosen after `--`: `cargo bench --bench drain -- --scenario a`.

use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use nmo_devtools::bench::cli::{BenchArgs, run_all};

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    bench: BenchArgs,
    /// Passed by `cargo bench`; ignored.
    #[arg(long = "bench", hide = true)]
    cargo_bench: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let nmo = args
        .bench
        .nmo
        .clone()
        .unwrap_or_else(|| Path::new(env!("CARGO_BIN_EXE_nmo")).to_path_buf());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("drain: cannot start a runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout();
    match runtime.block_on(run_all(&args.bench, &nmo, &mut out)) {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("drain: {error}");
            ExitCode::FAILURE
        }
    }
}
