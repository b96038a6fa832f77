//! The `nmo` command line.

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use nmo::operator::{self, OperatorOptions};
use nmo::telemetry::{self, LogFormat};

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
        #[command(flatten)]
        options: OperatorOptions,
        /// Log line format.
        #[arg(long, value_enum, default_value = "text")]
        log_format: LogFormat,
    },
    /// Print the NodeMaintenance CustomResourceDefinition as YAML (what deploy/crd.yaml holds).
    Crd,
    /// Serve a simulated cluster (NodeMaintenance CRD installed) and write a kubeconfig for it.
    Sim(nmo_sim::cli::SimArgs),
    /// Show nmo draining a simulated cluster: live progress, a summary, the nodes restored.
    Demo(nmo::demo::DemoOptions),
    /// Benchmark concurrent drains: the simulator here, `nmo run` in a child process.
    Bench(nmo::bench::cli::BenchArgs),
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
    /// The simulated cluster failed.
    #[error("simulated cluster: {0}")]
    Sim(#[from] nmo_sim::SimError),
    /// The demo failed.
    #[error("demo: {0}")]
    Demo(#[from] nmo::demo::DemoError),
    /// A benchmark failed.
    #[error("bench: {0}")]
    Bench(#[from] nmo::bench::error::BenchError),
    /// The CRD could not be turned into JSON for the simulator.
    #[error("cannot convert the CRD: {0}")]
    Json(#[from] serde_json::Error),
}

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
        } => runtime()?.block_on(run_operator(options, log_format)),
        Command::Demo(options) => {
            quiet_logs_by_default();
            runtime()?.block_on(run_demo(options))
        }
        Command::Bench(args) => {
            let nmo = match &args.nmo {
                Some(path) => path.clone(),
                None => std::env::current_exe()?,
            };
            let mut out = std::io::stdout();
            runtime()?.block_on(nmo::bench::cli::run_all(&args, &nmo, &mut out))?;
            Ok(())
        }
        Command::Sim(args) => {
            let crd = serde_json::to_value(nmo::crd::definition())?;
            runtime()?.block_on(nmo_sim::cli::run_with_crds(args, vec![crd]))?;
            Ok(())
        }
    }
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

async fn run_operator(options: OperatorOptions, log_format: LogFormat) -> Result<(), CliError> {
    let telemetry = telemetry::init(log_format)?;
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

/// The demo's output is its progress and tables: nmo's own info logs would scroll them away,
/// so unless RUST_LOG says otherwise only warnings are logged.
fn quiet_logs_by_default() {
    if std::env::var_os("RUST_LOG").is_none() {
        // SAFETY: called before the runtime starts, while this is the only thread.
        unsafe { std::env::set_var("RUST_LOG", "warn") };
    }
}

async fn run_demo(options: nmo::demo::DemoOptions) -> Result<(), CliError> {
    // Traces go to Jaeger when OTEL_EXPORTER_OTLP_ENDPOINT is set; otherwise nothing is exported.
    let telemetry = telemetry::init(LogFormat::Text)?;
    let mut out = std::io::stdout();
    let outcome = nmo::demo::run(&options, nmo::demo::Display::Live, &mut out, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await;
    telemetry.shutdown().await;
    let report = outcome?;
    if !report.all_succeeded() || !report.all_restored() {
        return Err(CliError::Demo(nmo::demo::DemoError::Options(
            "not every maintenance succeeded and was undone (see the tables above)".into(),
        )));
    }
    Ok(())
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
