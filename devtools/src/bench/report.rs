//! The benchmark's output: a table of every scenario with its targets, or JSON lines.

use std::fmt::Write as _;

use super::figures::Target;
use super::real_figures::{ms_per_node, per_node};
use super::result::ScenarioResult;
use crate::demo::table::Table;

/// The figures of every scenario as a table.
pub fn figures_table(results: &[ScenarioResult]) -> String {
    let mut table = Table::new(&[
        "scenario",
        "nodes x pods",
        "in maint.",
        "wall",
        "p50",
        "p99",
        "evicted",
        "requests",
        "per pod",
        "other/node",
        "429s",
        "conns",
        "peak RSS",
        "CPU",
    ]);
    for r in results {
        table.row(vec![
            if r.backend == "sim" {
                r.scenario.clone()
            } else {
                format!("{} ({})", r.scenario, r.backend)
            },
            format!("{} x {}", r.nodes, r.pods_per_node),
            r.maintenance.to_string(),
            format!("{:.2} s", r.wall_s),
            format!("{:.2} s", r.p50_s),
            format!("{:.2} s", r.p99_s),
            r.evicted_pods.to_string(),
            r.requests.total.to_string(),
            format!("{:.2}", r.requests_per_evicted_pod),
            format!("{:.1}", r.other_requests_per_node),
            r.requests.too_many_requests.to_string(),
            r.requests.connections.to_string(),
            format!("{:.1} MiB", r.peak_rss_mib),
            format!("{:.2} s", r.cpu_s),
        ]);
    }
    table.render()
}

/// The drain policy figures of the budgeted scenarios, and what each maintenance showed.
pub fn policy_tables(results: &[ScenarioResult]) -> String {
    let mut figures = Table::new(&[
        "scenario",
        "refused/evicted pod",
        "allows -> evicted p50 / p99",
        "evictions done",
        "floor (start-up x pods/budget)",
        "Succeeded p99",
        "floor + grace",
        "diagnosis reads",
    ]);
    let mut shown = Table::new(&[
        "scenario",
        "maintenance",
        "phase",
        "DrainBlocked shown (s after creation)",
        "expected",
        "correct after",
    ]);
    for r in results {
        let Some(p) = &r.policy else { continue };
        figures.row(vec![
            r.scenario.clone(),
            format!("{:.2} ({})", p.refused_per_evicted_pod, p.refused),
            format!(
                "{:.0} / {:.0} ms ({} timed)",
                p.allow_to_evict_p50_ms, p.allow_to_evict_p99_ms, p.timed_evictions
            ),
            p.evictions_done_s
                .map_or_else(|| "-".into(), |s| format!("{s:.1} s")),
            format!(
                "{:.1} s ({:.0} s x {})",
                p.floor_s, p.startup_s, p.pods_per_budget
            ),
            format!("{:.1} s", r.p99_s),
            format!("{:.1} s", p.floor_s + p.grace_s),
            p.diagnosis_reads
                .map_or_else(|| "-".into(), |n| n.to_string()),
        ]);
        for d in &p.diagnoses {
            let showed: Vec<String> = d
                .showed
                .iter()
                .map(|(reason, at)| format!("{reason} ({at:.1})"))
                .collect();
            shown.row(vec![
                r.scenario.clone(),
                d.maintenance.clone(),
                d.phase.clone(),
                if showed.is_empty() {
                    "-".into()
                } else {
                    showed.join(", ")
                },
                d.expected.clone().unwrap_or_else(|| "-".into()),
                d.correct_after_s
                    .map_or_else(|| "-".into(), |s| format!("{s:.1} s")),
            ]);
        }
    }
    let mut out = figures.render();
    out.push('\n');
    out.push_str(&shown.render());
    for r in results {
        let Some(p) = &r.policy else { continue };
        for d in p.diagnoses.iter().filter(|d| d.expected.is_some()) {
            if let Some(message) = &d.message {
                let _ = writeln!(out, "{} {}: {message}", r.scenario, d.maintenance);
            }
        }
    }
    out
}

/// nmo's requests by verb, one line per scenario.
pub fn verbs_lines(results: &[ScenarioResult]) -> String {
    let mut out = String::new();
    for r in results {
        let _ = writeln!(
            out,
            "{:<6} {} (per evicted pod: {})",
            r.scenario,
            r.requests.by_verb_line(),
            per_pod_by_verb(r)
        );
    }
    out
}

fn per_pod_by_verb(r: &ScenarioResult) -> String {
    let pods = r.evicted_pods.max(1) as f64;
    let mut verbs: Vec<(&String, &u64)> = r.requests.by_verb.iter().collect();
    verbs.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    verbs
        .iter()
        .map(|(verb, n)| format!("{verb} {:.2}", **n as f64 / pods))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every target with its figure and whether it is met.
pub fn targets_table(rows: &[(String, Target)]) -> String {
    let mut table = Table::new(&["scenario", "target", "wanted", "measured", "met"]);
    for (scenario, t) in rows {
        table.row(vec![
            scenario.clone(),
            t.what.clone(),
            t.target.clone(),
            t.actual.clone(),
            if t.met { "yes" } else { "NO" }.into(),
        ]);
    }
    table.render()
}

/// The machine the figures come from: cores, memory and CPU model.
pub fn machine() -> String {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<u64>().ok())
        })
        .map(|kib| format!("{:.1} GiB", kib as f64 / (1024.0 * 1024.0)))
        .unwrap_or_else(|| "unknown memory".into());
    format!("{cores} cores, {memory}, {model}")
}

/// The real-backend figures of every scenario that has them: one row for nmo's run, one for
/// the floor's; then every run's requests by flow schema and priority level.
pub fn real_backend_table(results: &[ScenarioResult]) -> String {
    let mut table = Table::new(&[
        "scenario",
        "run",
        "wall",
        "wall / floor",
        "p50",
        "p99",
        "CPU/node: nmo",
        "kube-apiserver",
        "etcd",
        "requests/node (APF)",
        "APF 429s",
        "429s (audit)",
    ]);
    let mut flows = String::new();
    for r in results {
        let Some(real) = &r.real else { continue };
        let nodes = r.maintenance;
        let f = &real.floor;
        table.row(vec![
            r.scenario.clone(),
            "nmo".into(),
            format!("{:.2} s", r.wall_s),
            real.wall_over_floor
                .map_or_else(|| "-".into(), |x| format!("{x:.2}x")),
            format!("{:.2} s", r.p50_s),
            format!("{:.2} s", r.p99_s),
            format!("{:.1} ms", r.cpu_ms_per_node),
            format!("{:.1} ms", ms_per_node(real.cost.apiserver_cpu_s, nodes)),
            format!("{:.1} ms", ms_per_node(real.cost.etcd_cpu_s, nodes)),
            format!("{:.1}", per_node(real.cost.dispatched(), nodes)),
            real.cost.rejected().to_string(),
            r.requests.too_many_requests.to_string(),
        ]);
        table.row(vec![
            r.scenario.clone(),
            "floor".into(),
            format!("{:.2} s", f.wall_s),
            "1.00x".into(),
            format!("{:.2} s", f.p50_s),
            format!("{:.2} s", f.p99_s),
            "-".into(),
            format!("{:.1} ms", ms_per_node(f.cost.apiserver_cpu_s, nodes)),
            format!("{:.1} ms", ms_per_node(f.cost.etcd_cpu_s, nodes)),
            format!("{:.1}", per_node(f.cost.dispatched(), nodes)),
            f.cost.rejected().to_string(),
            f.too_many_requests.to_string(),
        ]);
        let _ = writeln!(flows, "{:<6} nmo   {}", r.scenario, real.cost.flows_line());
        let _ = writeln!(flows, "{:<6} floor {}", r.scenario, f.cost.flows_line());
    }
    let mut out = table.render();
    out.push_str(
        "\nrequests by flow schema / priority level (every client of the control plane):\n",
    );
    out.push_str(&flows);
    out.push_str("\nnmo's requests per drained node beyond the pods' removals:\n");
    out.push_str(&overhead_table(results));
    out
}

/// nmo's requests per drained node other than evictions and pod deletes, and what an API
/// server whose etcd streams lists would not see of them (the watches' initial LISTs).
fn overhead_table(results: &[ScenarioResult]) -> String {
    let mut table = Table::new(&[
        "scenario",
        "evictions",
        "pod deletes",
        "beyond removals/node",
        "initial LISTs/node",
        "on a streaming etcd/node",
    ]);
    for r in results {
        let Some(real) = &r.real else { continue };
        let o = &real.overhead;
        table.row(vec![
            r.scenario.clone(),
            r.requests.evictions.to_string(),
            r.requests.pod_deletes().to_string(),
            format!("{:.1}", o.beyond_removals),
            format!("{:.1}", o.initial_lists),
            format!("{:.1}", o.streaming_lists),
        ]);
    }
    table.render()
}
