//! The development subcommands of `nmo-dev` and how each runs.

use nmo::observability::telemetry::{self, LogFormat};

use super::{bench, demo};

/// The development subcommands (`nmo-dev` only).
#[derive(Debug, clap::Subcommand)]
pub enum DevCommand {
    /// Serve a simulated cluster (NodeMaintenance CRD installed) and write a kubeconfig for it.
    Sim(nmo_sim::cli::SimArgs),
    /// Show nmo draining a simulated cluster: live progress, a summary, the nodes restored.
    Demo(demo::DemoOptions),
    /// Benchmark concurrent drains: the simulator here, `nmo run` in a child process.
    Bench(bench::cli::BenchArgs),
}

/// Why a development subcommand failed.
#[derive(Debug, thiserror::Error)]
pub enum DevError {
    /// Standard output could not be written, or this executable's path is unknown.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Logging or tracing could not start.
    #[error(transparent)]
    Telemetry(#[from] telemetry::TelemetryError),
    /// The CRD could not be turned into JSON for the simulator.
    #[error("cannot convert the CRD: {0}")]
    Json(#[from] serde_json::Error),
    /// The simulated cluster failed.
    #[error("simulated cluster: {0}")]
    Sim(#[from] nmo_sim::SimError),
    /// The demo failed.
    #[error("demo: {0}")]
    Demo(#[from] demo::DemoError),
    /// A benchmark failed.
    #[error("bench: {0}")]
    Bench(#[from] bench::error::BenchError),
}

/// The demo's output is its progress and tables: nmo's own info logs would scroll them away,
/// so unless RUST_LOG says otherwise only warnings are logged.
const DEMO_LOG_FILTER: &str = "warn";

/// Runs a development subcommand to its end.
pub async fn run(command: DevCommand) -> Result<(), DevError> {
    match command {
        DevCommand::Sim(args) => {
            // The simulator knows no CRD of its own: it serves nmo's.
            let crd = serde_json::to_value(nmo::crd::definition())?;
            nmo_sim::cli::run_with_crds(args, vec![crd]).await?;
            Ok(())
        }
        DevCommand::Demo(options) => run_demo(options).await,
        DevCommand::Bench(args) => {
            let nmo = match &args.nmo {
                Some(path) => path.clone(),
                None => std::env::current_exe()?,
            };
            let mut out = std::io::stdout();
            bench::cli::run_all(&args, &nmo, &mut out).await?;
            Ok(())
        }
    }
}

async fn run_demo(options: demo::DemoOptions) -> Result<(), DevError> {
    // Traces go to Jaeger when OTEL_EXPORTER_OTLP_ENDPOINT is set; otherwise nothing is exported.
    let telemetry = telemetry::init(LogFormat::Text, DEMO_LOG_FILTER)?;
    let mut out = std::io::stdout();
    let outcome = demo::run(&options, demo::Display::Live, &mut out, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await;
    telemetry.shutdown().await;
    let report = outcome?;
    if !report.all_succeeded() || !report.all_restored() {
        return Err(DevError::Demo(demo::DemoError::Options(
            "not every maintenance succeeded and was undone (see the tables above)".into(),
        )));
    }
    Ok(())
}
