//! The `nmo` command line.

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// nmo: Kubernetes node maintenance operator (drop-in for the medik8s Node Maintenance Operator).
#[derive(Parser, Debug)]
#[command(name = "nmo", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the NodeMaintenance CustomResourceDefinition as YAML (what deploy/crd.yaml holds).
    Crd,
}

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
enum CliError {
    /// The CRD could not be rendered as YAML.
    #[error("cannot render the CRD as YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
    /// Standard output could not be written.
    #[error("cannot write to standard output: {0}")]
    Stdout(#[from] std::io::Error),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("nmo: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Crd => {
            let yaml = nmo::crd::definition_yaml()?;
            std::io::stdout().lock().write_all(yaml.as_bytes())?;
            Ok(())
        }
    }
}
