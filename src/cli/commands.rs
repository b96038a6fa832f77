//! The `nmo` command line as a whole: the operator's subcommands (`run`, `crd`, `plan`, `uninstall`), the
//! parsing that reads the Go operator's one-dash flags, and how each command runs. Both
//! binaries start here: `nmo` (src/main.rs) parses [`Cli`]; `nmo-dev` (crate `nmo-devtools`)
//! parses its own command line, which flattens [`Command`] next to the development tools, and
//! hands the operator's commands to [`dispatch`], so it runs every one of them the same way.

use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use super::{RunArgs, RunError, go_flags};

/// nmo: Kubernetes node maintenance operator (drop-in for the medik8s Node Maintenance Operator).
///
/// Without a subcommand nmo runs the operator, as `nmo run` does, so the Go operator's command
/// line (`/manager --leader-elect --zap-log-level=info`) works unchanged.
#[derive(Parser, Debug)]
#[command(name = "nmo", version = crate::build_info::VERSION_LINE, about,
          args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// The subcommand, if any.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The operator's flags, when no subcommand is given.
    #[command(flatten)]
    pub run: RunArgs,
}

/// The operator's subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the operator against the cluster of the kubeconfig (or in-cluster config); the same
    /// as no subcommand.
    Run(Box<RunArgs>),
    /// Print the NodeMaintenance CustomResourceDefinition as YAML (what deploy/base/crd.yaml holds).
    Crd,
    /// Show what draining these nodes would do and what would block it, changing nothing.
    /// Exit status: 0 nothing blocks, 3 something will, 1 no plan could be made.
    Plan(crate::plan::PlanArgs),
    /// Remove nmo without stranding a node: delete every NodeMaintenance, wait until nmo has
    /// given each node back, then delete the CRD (unless --keep-crd) and every object labelled
    /// app.kubernetes.io/name=nmo, but the shared lease namespace medik8s-leases. If the
    /// maintenances do not end within --timeout, nothing of nmo is deleted. Safe to run again.
    Uninstall(crate::uninstall::UninstallArgs),
}

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The CRD could not be rendered as YAML.
    #[error("cannot render the CRD as YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
    /// Standard output could not be written, or the runtime could not start.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The operator process stopped with an error.
    #[error(transparent)]
    Run(#[from] RunError),
    /// `nmo plan` could not make a plan.
    #[error(transparent)]
    Plan(#[from] crate::plan::PlanError),
    /// `nmo uninstall` stopped before nmo was removed.
    #[error(transparent)]
    Uninstall(#[from] crate::uninstall::UninstallError),
}

/// The `nmo` binary: parses the command line, runs the command, exits with its status.
pub fn main() -> ExitCode {
    let cli: Cli = parse_command_line();
    exit_code(dispatch(cli.command, cli.run))
}

/// The command line `P` describes, with the Go operator's one-dash long flags
/// (`-leader-elect`) read as two-dash ones. Exits with clap's message when it does not parse.
pub fn parse_command_line<P: CommandFactory + FromArgMatches>() -> P {
    let command = P::command();
    let args =
        go_flags::normalize_single_dash(std::env::args_os(), &go_flags::long_names(&command));
    let matches = command.get_matches_from(args);
    P::from_arg_matches(&matches).unwrap_or_else(|error| error.exit())
}

/// A command's result as the process's exit status; an error is printed first.
pub fn exit_code<E: std::fmt::Display>(result: Result<ExitCode, E>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("nmo: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `command`; without one, the operator with the flags `run`.
pub fn dispatch(command: Option<Command>, run: RunArgs) -> Result<ExitCode, CommandError> {
    let Some(command) = command else {
        return run_operator(run).map(|()| ExitCode::SUCCESS);
    };
    match command {
        Command::Crd => {
            let yaml = crate::crd::definition_yaml()?;
            std::io::stdout().lock().write_all(yaml.as_bytes())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Plan(args) => {
            let mut out = std::io::stdout();
            let code = runtime()?.block_on(crate::plan::run(&args, &mut out))?;
            Ok(ExitCode::from(code))
        }
        Command::Uninstall(args) => {
            let mut out = std::io::stdout();
            runtime()?.block_on(crate::uninstall::run(&args, &mut out))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => run_operator(*args).map(|()| ExitCode::SUCCESS),
    }
}

/// The multi-threaded tokio runtime every command runs on.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

fn run_operator(args: RunArgs) -> Result<(), CommandError> {
    Ok(runtime()?.block_on(super::run(args, termination()))?)
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
