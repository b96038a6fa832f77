//! The `nmo` command line.

use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use nmo::cli::{RunArgs, go_flags};

/// jemalloc instead of glibc's malloc: at 500 drains at once glibc's malloc took 43% of nmo's
/// CPU (`perf` at b2000: `_int_malloc`, `malloc_consolidate`, `unlink_chunk`, `free`), a share
/// that grew with the heap. Its options are built in (`.cargo/config.toml`).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// nmo: Kubernetes node maintenance operator (drop-in for the medik8s Node Maintenance Operator).
///
/// Without a subcommand nmo runs the operator, as `nmo run` does, so the Go operator's command
/// line (`/manager --leader-elect --zap-log-level=info`) works unchanged.
#[derive(Parser, Debug)]
#[command(name = "nmo", version = nmo::build_info::VERSION_LINE, about,
          args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// The operator's flags, when no subcommand is given.
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the operator against the cluster of the kubeconfig (or in-cluster config); the same
    /// as no subcommand.
    Run(Box<RunArgs>),
    /// Print the NodeMaintenance CustomResourceDefinition as YAML (what deploy/base/crd.yaml holds).
    Crd,
    /// Show what draining these nodes would do and what would block it, changing nothing.
    /// Exit status: 0 nothing blocks, 3 something will, 1 no plan could be made.
    Plan(nmo::plan::PlanArgs),
    /// `sim`, `demo` and `bench`: only in development builds (feature `devtools`).
    #[cfg(feature = "devtools")]
    #[command(flatten)]
    Dev(nmo::devtools::DevCommand),
}

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
enum CliError {
    /// The CRD could not be rendered as YAML.
    #[error("cannot render the CRD as YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
    /// Standard output could not be written, or the runtime could not start.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The operator process stopped with an error.
    #[error(transparent)]
    Run(#[from] nmo::cli::RunError),
    /// `nmo plan` could not make a plan.
    #[error(transparent)]
    Plan(#[from] nmo::plan::PlanError),
    /// A development subcommand (sim, demo, bench) failed.
    #[cfg(feature = "devtools")]
    #[error(transparent)]
    Dev(#[from] nmo::devtools::DevError),
}

fn main() -> ExitCode {
    let cli = parse_command_line();
    match dispatch(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("nmo: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The command line, with the Go operator's one-dash long flags (`-leader-elect`) read as
/// two-dash ones.
fn parse_command_line() -> Cli {
    let command = Cli::command();
    let args =
        go_flags::normalize_single_dash(std::env::args_os(), &go_flags::long_names(&command));
    let matches = command.get_matches_from(args);
    Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit())
}

fn dispatch(cli: Cli) -> Result<ExitCode, CliError> {
    let Some(command) = cli.command else {
        return run_operator(cli.run).map(|()| ExitCode::SUCCESS);
    };
    match command {
        Command::Crd => {
            let yaml = nmo::crd::definition_yaml()?;
            std::io::stdout().lock().write_all(yaml.as_bytes())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Plan(args) => {
            let mut out = std::io::stdout();
            let code = runtime()?.block_on(nmo::plan::run(&args, &mut out))?;
            Ok(ExitCode::from(code))
        }
        Command::Run(args) => run_operator(*args).map(|()| ExitCode::SUCCESS),
        #[cfg(feature = "devtools")]
        Command::Dev(command) => {
            runtime()?.block_on(nmo::devtools::run(command))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

fn run_operator(args: RunArgs) -> Result<(), CliError> {
    Ok(runtime()?.block_on(nmo::cli::run(args, termination()))?)
}

/// Completes on SIGTERM (what the kubelet sends) or Ctrl-C.
async fn termination() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut sigterm) => {
                tokio::select! {
                    _ = sigterm.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops nmo");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("termination requested");
}
