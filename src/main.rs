//! The `nmo` command line.

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use nmo::observability::telemetry::{self, LogFormat};
use nmo::operator::{self, OperatorOptions};

/// nmo: Kubernetes node maintenance operator (drop-in for the medik8s Node Maintenance Operator).
#[derive(Parser, Debug)]
#[command(name = "nmo", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the operator against the cluster of the kubeconfig (or in-cluster config).
    Run {
        // Boxed: the flags are many, the other commands small.
        #[command(flatten)]
        options: Box<OperatorOptions>,
        /// Log line format.
        #[arg(long, value_enum, default_value = "text")]
        log_format: LogFormat,
    },
    /// Print the NodeMaintenance CustomResourceDefinition as YAML (what deploy/base/crd.yaml holds).
    Crd,
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
    /// Logging or tracing could not start.
    #[error(transparent)]
    Telemetry(#[from] telemetry::TelemetryError),
    /// No cluster configuration was found or it is unusable.
    #[error("cannot reach a cluster: {0}")]
    Kube(#[from] kube::Error),
    /// The operator stopped with an error.
    #[error(transparent)]
    Operator(#[from] operator::OperatorError),
    /// A development subcommand (sim, demo, bench) failed.
    #[cfg(feature = "devtools")]
    #[error(transparent)]
    Dev(#[from] nmo::devtools::DevError),
}

/// What `nmo run` logs when RUST_LOG is unset.
const RUN_LOG_FILTER: &str = "info";

fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("nmo: {error}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Crd => {
            let yaml = nmo::crd::definition_yaml()?;
            std::io::stdout().lock().write_all(yaml.as_bytes())?;
            Ok(())
        }
        Command::Run {
            options,
            log_format,
        } => runtime()?.block_on(run_operator(*options, log_format)),
        #[cfg(feature = "devtools")]
        Command::Dev(command) => Ok(runtime()?.block_on(nmo::devtools::run(command))?),
    }
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

async fn run_operator(options: OperatorOptions, log_format: LogFormat) -> Result<(), CliError> {
    let telemetry = telemetry::init(log_format, RUN_LOG_FILTER)?;
    let outcome = async {
        let config = kube::Config::infer()
            .await
            .map_err(kube::Error::InferConfig)?;
        let client = operator::client(config)?;
        operator::run(client, options, termination()).await?;
        Ok(())
    }
    .await;
    telemetry.shutdown().await;
    outcome
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
