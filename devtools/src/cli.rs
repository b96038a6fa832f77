//! The command line of `nmo-dev`: `nmo`'s (every operator command, run through
//! `nmo::cli::commands`) with the development subcommands added. A library item, not the
//! binary's, so that the documentation test (tests/it/docs) parses the docs' `cargo run -- ...`
//! commands with exactly this definition.

use clap::{Parser, Subcommand};
use nmo::cli::RunArgs;
use nmo::cli::commands;

use crate::DevCommand;

/// nmo: Kubernetes node maintenance operator (drop-in for the medik8s Node Maintenance
/// Operator), with its development tools (demo, bench, sim).
///
/// Without a subcommand nmo runs the operator, as `nmo run` does.
#[derive(Parser, Debug)]
#[command(name = "nmo", version = nmo::build_info::VERSION_LINE, about,
          args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// The subcommand, if any.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The operator's flags, when no subcommand is given.
    #[command(flatten)]
    pub run: RunArgs,
}

/// The operator's subcommands and the development ones.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// `run`, `crd`, `plan`: as in `nmo`.
    #[command(flatten)]
    Operator(commands::Command),
    /// `sim`, `demo`, `bench`.
    #[command(flatten)]
    Dev(DevCommand),
}
