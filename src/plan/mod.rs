//! `nmo plan NODE... [--selector LABELS]`: what a drain of these nodes would do, before
//! anything is changed. Read-only: it lists and gets, never writes.
//!
//! Per node, each pod and what the drain would do with it (evict, skip, delete, wait) and why,
//! classified by the same function the drain uses; each evicted pod's PodDisruptionBudgets
//! with the disruptions they allow now; and the blockers that can be predicted already: a
//! budget that can never allow a disruption, a pod under two budgets, replacements with
//! nowhere to go once all these nodes are cordoned together (a cross-node deadlock), and the
//! control-plane quorum rules of the webhook. Exit status: [`EXIT_CLEAR`] when nothing is
//! predicted to block, [`EXIT_BLOCKED`] when something will, [`EXIT_ERROR`] when no plan
//! could be made (and clap's 2 for a bad command line).
//!
//! - `snapshot`: the reads; `analysis` (with `budgets`): the plan, a pure function of them;
//!   `model`: both sides' types; `render`: table and JSON.

mod analysis;
pub mod model;
mod render;
mod snapshot;

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

pub use analysis::analyse;
pub use model::{Blocker, Plan, PlanInput};
pub use snapshot::{PlanRequest, read};

/// Exit status: nothing is predicted to block the drain.
pub const EXIT_CLEAR: u8 = 0;
/// Exit status: no plan could be made (the cluster could not be read, no node named...).
pub const EXIT_ERROR: u8 = 1;
/// Exit status: at least one blocker is predicted.
pub const EXIT_BLOCKED: u8 = 3;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Output {
    /// A table per node, then the blockers.
    #[default]
    Table,
    /// One JSON document.
    Json,
}

/// Flags of `nmo plan`.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanArgs {
    /// The nodes to plan a drain for (together, as if all were cordoned at once).
    #[arg(value_name = "NODE")]
    pub nodes: Vec<String>,
    /// Also every node matching this label selector, e.g. `topology.kubernetes.io/zone=a`.
    #[arg(long, short = 'l')]
    pub selector: Option<String>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value = "table")]
    pub output: Output,
    /// The kubeconfig file (default: as kubectl: KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long)]
    pub context: Option<String>,
}

/// Why no plan could be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Neither a node nor a selector matching one.
    #[error("no node to plan for: name at least one node, or give a --selector that matches some")]
    NoNodes,
    /// The kubeconfig could not be read or used.
    #[error("cannot use the kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    /// No cluster configuration was found.
    #[error("cannot find a cluster configuration: {0}")]
    InferConfig(#[from] kube::config::InferConfigError),
    /// The client could not be built.
    #[error("cannot build a client: {0}")]
    Client(#[source] kube::Error),
    /// A read failed.
    #[error("cannot {what}: {source}")]
    Read {
        /// What was read.
        what: String,
        /// Why it failed.
        #[source]
        source: kube::Error,
    },
    /// A read took too long.
    #[error("cannot {what}: no answer within {after:?}")]
    Timeout {
        /// What was read.
        what: String,
        /// The deadline.
        after: Duration,
    },
    /// The JSON output could not be made.
    #[error("cannot write JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// Standard output could not be written.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Reads the cluster and makes the plan for `request`.
pub async fn plan(client: &Client, request: &PlanRequest) -> Result<Plan, PlanError> {
    let input = read(client, request).await?;
    Ok(analyse(&input))
}

async fn client(args: &PlanArgs) -> Result<Client, PlanError> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?
        }
        None if args.context.is_some() => kube::Config::from_kubeconfig(&options).await?,
        None => kube::Config::infer().await?,
    };
    Client::try_from(config).map_err(PlanError::Client)
}

/// `nmo plan`: prints the plan to `out` and returns the exit status it calls for.
pub async fn run(args: &PlanArgs, out: &mut (dyn Write + Send)) -> Result<u8, PlanError> {
    if args.nodes.is_empty() && args.selector.is_none() {
        return Err(PlanError::NoNodes);
    }
    let client = client(args).await?;
    let request = PlanRequest {
        nodes: args.nodes.clone(),
        selector: args.selector.clone(),
    };
    let plan = plan(&client, &request).await?;
    match args.output {
        Output::Table => out.write_all(render::text(&plan).as_bytes())?,
        Output::Json => writeln!(out, "{}", render::json(&plan)?)?,
    }
    out.flush()?;
    Ok(if plan.clear() {
        EXIT_CLEAR
    } else {
        EXIT_BLOCKED
    })
}
