//! `nmo bench` and `cargo bench --bench drain`: run the scenarios and print the figures.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::error::BenchError;
use super::result::{ScenarioResult, flatness};
use super::{real, report, run, scenario};

/// The API server a benchmark runs against.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchBackend {
    /// The simulated API server, in the benchmark's process.
    #[default]
    Sim,
    /// A real etcd, kube-apiserver, controller manager and scheduler from KUBEBUILDER_ASSETS
    /// (`export KUBEBUILDER_ASSETS=$(../shared/k8s/assets)`), one per scenario.
    Real,
}

/// Flags of `nmo bench`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct BenchArgs {
    /// Scenarios to run: a, a-fast, b (= b100 b500 b2000), b100, b500, b2000, c. Default: all.
    #[arg(long = "scenario", value_name = "NAME")]
    pub scenarios: Vec<String>,
    /// Print one JSON object per scenario instead of tables.
    #[arg(long)]
    pub json: bool,
    /// The nmo binary to run as the operator (default: this executable).
    #[arg(long)]
    pub nmo: Option<PathBuf>,
    /// The API server to run against.
    #[arg(long, value_enum, default_value_t = BenchBackend::Sim)]
    pub backend: BenchBackend,
    /// Run each chosen scenario at this many nodes instead (the same share of them in
    /// maintenance).
    #[arg(long)]
    pub nodes: Option<usize>,
}

/// Runs the chosen scenarios with the operator binary `nmo`, printing as they finish.
pub async fn run_all(
    args: &BenchArgs,
    nmo: &Path,
    out: &mut (dyn Write + Send),
) -> Result<Vec<ScenarioResult>, BenchError> {
    let scenarios: Vec<_> = scenario::by_names(&args.scenarios)
        .into_iter()
        .map(|s| match args.nodes {
            Some(nodes) => s.with_nodes(nodes),
            None => s,
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("nmo-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    if !args.json {
        writeln!(out, "machine: {}", report::machine())?;
        writeln!(
            out,
            "operator: {} (logs in {})",
            nmo.display(),
            dir.display()
        )?;
    }
    let mut results = Vec::new();
    for s in &scenarios {
        if !args.json {
            writeln!(out, "running {}: {} ...", s.name, s.title)?;
            out.flush()?;
        }
        let result = match args.backend {
            BenchBackend::Sim => run::run(s, nmo, &dir).await?,
            BenchBackend::Real => real::run(s, nmo, &dir).await?,
        };
        if args.json {
            writeln!(out, "{}", serde_json::to_string(&result)?)?;
        } else {
            writeln!(
                out,
                "  done in {:.2} s, {} requests, {:.1} MiB peak",
                result.wall_s, result.requests.total, result.peak_rss_mib
            )?;
        }
        out.flush()?;
        results.push(result);
    }
    let flat = flatness(&results);
    if args.json {
        if let Some(flat) = flat {
            writeln!(out, "{}", serde_json::json!({"flatness": flat}))?;
        }
        return Ok(results);
    }
    writeln!(out)?;
    out.write_all(report::figures_table(&results).as_bytes())?;
    writeln!(out, "\nnmo's requests by verb:")?;
    out.write_all(report::verbs_lines(&results).as_bytes())?;
    let mut targets: Vec<(String, super::result::Target)> = results
        .iter()
        .flat_map(|r| r.targets.iter().map(|t| (r.scenario.clone(), t.clone())))
        .collect();
    if let Some(flat) = flat {
        targets.extend(flat.into_iter().map(|t| ("b".to_string(), t)));
    }
    writeln!(out, "\ntargets:")?;
    out.write_all(report::targets_table(&targets).as_bytes())?;
    Ok(results)
}
