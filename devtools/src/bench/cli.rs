//! `nmo bench` and `cargo bench --bench drain`: run the scenarios and print the figures.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::error::BenchError;
use super::fleet::result::FleetResult;
use super::result::{ScenarioResult, flatness};
use super::{fleet, real, report, run, scenario, soak, vms};

/// The API server a benchmark runs against.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchBackend {
    /// The simulated API server, in the benchmark's process.
    #[default]
    Sim,
    /// A real etcd, kube-apiserver, controller manager and scheduler from KUBEBUILDER_ASSETS
    /// (`export KUBEBUILDER_ASSETS=$(../shared/k8s/assets)`), one per scenario (the scenarios
    /// a to c; d, the fleet scenarios and the soak run on the simulator only).
    Real,
}

/// Runs one fault soak and prints its report; a failed check is an error.
async fn run_soak(
    config: &soak::SoakConfig,
    json: bool,
    nmo: &Path,
    dir: &Path,
    out: &mut (dyn Write + Send),
) -> Result<(), BenchError> {
    if !json {
        writeln!(out, "running {}: the fault soak ...", config.name)?;
        out.flush()?;
    }
    let report = soak::run(config, nmo, dir).await?;
    if json {
        writeln!(out, "{}", serde_json::to_string(&report)?)?;
    } else {
        writeln!(out, "{report}")?;
    }
    out.flush()?;
    if report.passed() {
        Ok(())
    } else {
        let failed: Vec<String> = report
            .checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| format!("{}: {} (target {})", c.what, c.actual, c.target))
            .collect();
        Err(BenchError::SoakFailed(failed.join("; ")))
    }
}

/// Flags of `nmo bench`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct BenchArgs {
    /// Scenarios to run: a, a-fast, b (= b100 b500 b2000), b100, b500, b2000, c, d, fleet,
    /// fleet2000, fleet2000-off (fleet* = the three). Default: all.
    /// `soak` (the fault soak: 100 maintenances, faults, three leader kills; minutes) and
    /// `soak-ci` (its CI size) run only when named; they exit non-zero when a check fails.
    /// `vm` (nodes running KubeVirt VMs that live-migrate, next to ordinary pods) runs only when
    /// named.
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
    // Over 80 lines: one sequence in the order the scenarios print: which kinds were named, then
    // the soaks, the VM scenarios, the single and the fleet scenarios, each a short loop over its
    // own kind; split, the order would be spread over as many functions.
    let soaks: Vec<soak::SoakConfig> = args
        .scenarios
        .iter()
        .filter_map(|name| soak::SoakConfig::named(name))
        .collect();
    let vm_scenarios: Vec<vms::VmScenario> = args
        .scenarios
        .iter()
        .filter_map(|name| vms::VmScenario::named(name))
        .collect();
    let others: Vec<String> = args
        .scenarios
        .iter()
        .filter(|name| {
            soak::SoakConfig::named(name).is_none() && vms::VmScenario::named(name).is_none()
        })
        .cloned()
        .collect();
    let scenarios: Vec<_> = scenario::by_names(&others)
        .into_iter()
        .map(|s| match args.nodes {
            Some(nodes) => s.with_nodes(nodes),
            None => s,
        })
        .collect();
    let fleet_names: Vec<String> = others
        .iter()
        .filter(|n| n.starts_with("fleet"))
        .cloned()
        .collect();
    // Named only fleet scenarios: none of the others; named none: all of both.
    let scenarios = if !others.is_empty() && fleet_names.len() == others.len() {
        Vec::new()
    } else {
        scenarios
    };
    let fleets = if others.is_empty() || !fleet_names.is_empty() {
        fleet::scenario::by_names(&fleet_names)
    } else {
        Vec::new()
    };
    if args.backend == BenchBackend::Real && (!soaks.is_empty() || !fleets.is_empty()) {
        return Err(BenchError::Real(
            "the fleet scenarios and the soak run on the simulator only; name scenarios a to c \
             with --backend real"
                .into(),
        ));
    }
    let dir = std::env::temp_dir().join(format!("nmo-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    for config in &soaks {
        run_soak(config, args.json, nmo, &dir, out).await?;
    }
    if !vm_scenarios.is_empty() && args.backend == BenchBackend::Real {
        return Err(BenchError::Real(
            "the vm scenario runs on the simulator only".into(),
        ));
    }
    for scenario in &vm_scenarios {
        vms::run_and_print(scenario, args.json, nmo, &dir, out).await?;
    }
    if !(soaks.is_empty() && vm_scenarios.is_empty()) && others.is_empty() {
        return Ok(Vec::new());
    }
    if !args.json {
        writeln!(out, "machine: {}", report::machine())?;
        writeln!(
            out,
            "operator: {} (logs in {})",
            nmo.display(),
            dir.display()
        )?;
        if runs_the_dev_binary(nmo) {
            writeln!(
                out,
                "  (the dev binary: its simulator and tools add several MiB of code to the operator's \
                 peak RSS; `--nmo target/release/nmo`, or `cargo bench --bench drain`, measures the \
                 binary the image ships)"
            )?;
        }
    }
    let mut results = Vec::new();
    for s in &scenarios {
        if !args.json {
            writeln!(out, "running {}: {} ...", s.name, s.title)?;
            out.flush()?;
        }
        let result = match args.backend {
            BenchBackend::Sim => run::run(s, nmo, &dir).await?,
            // Two control planes' runs in one future: too large for the stack unboxed.
            BenchBackend::Real => Box::pin(real::run(s, nmo, &dir)).await?,
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
    let mut fleet_results: Vec<FleetResult> = Vec::new();
    for s in &fleets {
        if !args.json {
            writeln!(out, "running {}: {} ...", s.name, s.title)?;
            out.flush()?;
        }
        let result = fleet::run(s, nmo, &dir).await?;
        if args.json {
            writeln!(out, "{}", serde_json::to_string(&result)?)?;
        } else {
            writeln!(
                out,
                "  done in {:.2} s, at most {} nodes out, {} queued",
                result.wall_s, result.max_unavailable, result.queued
            )?;
        }
        out.flush()?;
        fleet_results.push(result);
    }
    let flat = flatness(&results);
    if args.json {
        if let Some(flat) = flat {
            writeln!(out, "{}", serde_json::json!({"flatness": flat}))?;
        }
        return Ok(results);
    }
    writeln!(out)?;
    if !results.is_empty() {
        out.write_all(report::figures_table(&results).as_bytes())?;
        if results.iter().any(|r| r.policy.is_some()) {
            writeln!(out, "\ndrain policy:")?;
            out.write_all(report::policy_tables(&results).as_bytes())?;
        }
        if results.iter().any(|r| r.real.is_some()) {
            writeln!(
                out,
                "\nreal API server: nmo against the floor, control-plane cost:"
            )?;
            out.write_all(super::report::real_backend_table(&results).as_bytes())?;
        }
        writeln!(out, "\nnmo's requests by verb:")?;
        out.write_all(report::verbs_lines(&results).as_bytes())?;
    }
    if !fleet_results.is_empty() {
        writeln!(
            out,
            "\nfleet (budget = --max-parallel-maintenances = --max-unavailable-nodes):"
        )?;
        out.write_all(fleet::result::table(&fleet_results).as_bytes())?;
        for r in &fleet_results {
            writeln!(out, "{:<14} {}", r.scenario, r.requests.by_verb_line())?;
        }
    }
    let mut targets: Vec<(String, super::figures::Target)> = results
        .iter()
        .flat_map(|r| r.targets.iter().map(|t| (r.scenario.clone(), t.clone())))
        .chain(
            fleet_results
                .iter()
                .flat_map(|r| r.targets.iter().map(|t| (r.scenario.clone(), t.clone()))),
        )
        .collect();
    if let Some(flat) = flat {
        targets.extend(flat.into_iter().map(|t| ("b".to_string(), t)));
    }
    writeln!(out, "\ntargets:")?;
    out.write_all(report::targets_table(&targets).as_bytes())?;
    Ok(results)
}

/// Whether the operator the benchmark runs is the dev tools' binary (`nmo-dev`), not `nmo`.
fn runs_the_dev_binary(nmo: &std::path::Path) -> bool {
    nmo.file_stem()
        .is_some_and(|stem| stem.to_string_lossy().starts_with("nmo-dev"))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::runs_the_dev_binary;

    #[test]
    fn the_dev_binary_is_told_from_the_operator() {
        assert!(runs_the_dev_binary(Path::new("target/release/nmo-dev")));
        assert!(!runs_the_dev_binary(Path::new("target/release/nmo")));
        assert!(!runs_the_dev_binary(Path::new("/usr/local/bin/nmo")));
    }
}
