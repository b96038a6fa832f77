//! `nmo plan NODE... [--selector LABELS]`: what a drain of these nodes would do, before
//! anything is changed. Read-only: it lists and gets, never writes.
//!
//! Per node, each pod and what the drain would do with it (evict, skip, delete, wait) and why,
//! classified by the same function the drain uses; each evicted pod's PodDisruptionBudgets
//! with the disruptions they allow now; and the blockers that can be predicted already: a
//! PDB that can never allow a disruption, a pod under two PDBs, replacements with
//! nowhere to go once all these nodes are cordoned together (a cross-node deadlock), and the
//! control-plane quorum rules of the webhook. Exit status: [`EXIT_CLEAR`] when nothing is
//! predicted to block, [`EXIT_BLOCKED`] when something will, [`EXIT_ERROR`] when no plan
//! could be made (and clap's 2 for a bad command line).
//!
//! - `snapshot`: the reads; `analysis`: the plan, a pure function of them (PDBs are read
//!   as the drain reads them, with `nmo_actors::pdb`); `model`: both sides' types;
//!   `render`: table and JSON; `error`: why no plan could be made.

mod analysis;
mod error;
pub mod interceptors;
pub mod model;
mod render;
mod snapshot;

use std::io::Write;

use kube::Client;

pub use analysis::analyse;
pub use error::PlanError;
pub use model::{Blocker, Plan, PlanInput};
pub use render::text as render_text;
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
    /// The cluster.
    #[command(flatten)]
    pub cluster: crate::cli::cluster_access::ClusterArgs,
}

/// Reads the cluster and makes the plan for `request`.
pub async fn plan(client: &Client, request: &PlanRequest) -> Result<Plan, PlanError> {
    let input = read(client, request).await?;
    Ok(analyse(&input))
}

/// `nmo plan`: prints the plan to `out` and returns the exit status it calls for.
pub async fn run(args: &PlanArgs, out: &mut (dyn Write + Send)) -> Result<u8, PlanError> {
    if args.nodes.is_empty() && args.selector.is_none() {
        return Err(PlanError::NoNodes);
    }
    let client = args.cluster.client().await?;
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
