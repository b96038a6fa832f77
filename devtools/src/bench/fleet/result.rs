//! The figures of one fleet run and the targets they are held against (printed, never
//! asserted).

use std::time::{Duration, Instant};

use serde::Serialize;

use super::observer::Seen;
use super::scenario::FleetScenario;
use crate::bench::figures::{Target, percentile};
use crate::bench::procstat::ProcessUsage;
use crate::demo::requests::RequestTotals;
use crate::demo::table::Table;

/// Upper bound for the time from a slot freeing to the next maintenance starting (the issue's
/// "within a second").
pub const SLOT_TO_START_S: f64 = 1.0;

/// The figures of one fleet scenario.
#[derive(Debug, Clone, Serialize)]
pub struct FleetResult {
    /// Scenario name.
    pub scenario: String,
    /// Its description.
    pub title: String,
    /// Nodes in the cluster.
    pub nodes: usize,
    /// NodeMaintenances created at once.
    pub maintenances: usize,
    /// The budget in nodes (None: no budget).
    pub budget_nodes: Option<usize>,
    /// First create to the last maintenance gone, seconds.
    pub wall_s: f64,
    /// The most nodes NotReady or cordoned at once.
    pub max_unavailable: usize,
    /// Maintenances that waited in the queue.
    pub queued: usize,
    /// Slot freed (a maintenance gone) to the next start, median, seconds.
    pub slot_to_start_p50_s: f64,
    /// The same, 99th percentile.
    pub slot_to_start_p99_s: f64,
    /// Slot-to-start pairs measured.
    pub slot_to_start_samples: usize,
    /// Status writes on a waiting maintenance while it waited, per waiting maintenance.
    pub writes_per_queued: f64,
    /// `QueuedMaintenance` events per waiting maintenance.
    pub events_per_queued: f64,
    /// nmo's GETs of NodeMaintenances (the undo reads one before releasing its finalizer; a
    /// waiting one is never read).
    pub maintenance_gets: u64,
    /// Node and pod watches nmo opened, per maintenance that started.
    pub watches_per_started: f64,
    /// nmo's requests.
    pub requests: RequestTotals,
    /// The operator's peak resident set, MiB.
    pub peak_rss_mib: f64,
    /// The operator's CPU time, seconds.
    pub cpu_s: f64,
    /// The targets.
    pub targets: Vec<Target>,
}

/// What the run measured besides the observer's view.
pub struct Measured {
    /// Wall time.
    pub wall: Duration,
    /// `QueuedMaintenance` events found.
    pub queued_events: u64,
    /// Node and pod watches nmo opened.
    pub watches: u64,
    /// nmo's GETs of NodeMaintenances.
    pub maintenance_gets: u64,
    /// nmo's requests.
    pub requests: RequestTotals,
    /// Its resource use at the end.
    pub usage: ProcessUsage,
    /// Its CPU time during the run.
    pub cpu: Duration,
}

/// Each freed slot paired with the next start, in time order: the k-th maintenance gone
/// frees the slot the k-th waiting maintenance to start takes.
pub fn slot_to_start(seen: &Seen) -> Vec<Duration> {
    let mut frees: Vec<Instant> = seen.maintenances.values().filter_map(|t| t.gone).collect();
    let mut starts: Vec<Instant> = seen
        .maintenances
        .values()
        .filter(|t| t.queued)
        .filter_map(|t| t.started)
        .collect();
    frees.sort();
    starts.sort();
    starts
        .iter()
        .zip(&frees)
        .map(|(start, free)| start.saturating_duration_since(*free))
        .collect()
}

impl FleetResult {
    /// Puts the figures together and judges them.
    pub fn new(scenario: &FleetScenario, seen: &Seen, measured: Measured) -> FleetResult {
        let queued: Vec<_> = seen.maintenances.values().filter(|t| t.queued).collect();
        let started = seen
            .maintenances
            .values()
            .filter(|t| t.started.is_some())
            .count();
        let per_queued = |n: f64| n / queued.len().max(1) as f64;
        let latencies = slot_to_start(seen);
        let writes: u64 = queued.iter().map(|t| t.writes_while_waiting).sum();
        let mut result = FleetResult {
            scenario: scenario.name.clone(),
            title: scenario.title.clone(),
            nodes: scenario.nodes,
            maintenances: scenario.maintenances,
            budget_nodes: scenario.budget_nodes(),
            wall_s: measured.wall.as_secs_f64(),
            max_unavailable: seen.max_unavailable,
            queued: queued.len(),
            slot_to_start_p50_s: percentile(&latencies, 0.50),
            slot_to_start_p99_s: percentile(&latencies, 0.99),
            slot_to_start_samples: latencies.len(),
            writes_per_queued: per_queued(writes as f64),
            events_per_queued: per_queued(measured.queued_events as f64),
            maintenance_gets: measured.maintenance_gets,
            watches_per_started: measured.watches as f64 / started.max(1) as f64,
            requests: measured.requests,
            peak_rss_mib: measured.usage.peak_rss_bytes as f64 / (1024.0 * 1024.0),
            cpu_s: measured.cpu.as_secs_f64(),
            targets: Vec::new(),
        };
        result.targets = targets(&result);
        result
    }
}

fn target(what: &str, wanted: String, actual: String, met: bool) -> Target {
    Target {
        what: what.into(),
        target: wanted,
        actual,
        met,
    }
}

fn targets(r: &FleetResult) -> Vec<Target> {
    let Some(budget) = r.budget_nodes else {
        return Vec::new();
    };
    let mut out = vec![target(
        "nodes unavailable at once",
        format!("<= budget ({budget})"),
        r.max_unavailable.to_string(),
        r.max_unavailable <= budget,
    )];
    if r.queued > 0 {
        out.push(target(
            "slot freed to next start (p99)",
            format!("<= {SLOT_TO_START_S} s"),
            format!(
                "{:.3} s (p50 {:.3} s, {} samples)",
                r.slot_to_start_p99_s, r.slot_to_start_p50_s, r.slot_to_start_samples
            ),
            r.slot_to_start_p99_s <= SLOT_TO_START_S,
        ));
        // A waiting maintenance has no node actor: no read, no watch; what it costs is its
        // place in the status and the one event the issue asks for (a later move of its place
        // is written at most every 30 s).
        out.push(target(
            "requests per waiting maintenance while waiting",
            "its queued status and event only (<= 1 + 1), no watch".into(),
            format!(
                "{:.2} status writes + {:.2} events; {:.2} node/pod watches per started maintenance",
                r.writes_per_queued, r.events_per_queued, r.watches_per_started
            ),
            r.writes_per_queued <= 1.0 && r.events_per_queued <= 1.0,
        ));
    }
    out
}

/// Every fleet result as a table.
pub fn table(results: &[FleetResult]) -> String {
    let mut table = Table::new(&[
        "scenario",
        "nodes",
        "maint.",
        "budget",
        "wall",
        "max unavail.",
        "queued",
        "slot->start p50/p99",
        "writes+events/queued",
        "nmo requests",
        "peak RSS",
        "CPU",
    ]);
    for r in results {
        table.row(vec![
            r.scenario.clone(),
            r.nodes.to_string(),
            r.maintenances.to_string(),
            r.budget_nodes.map_or_else(|| "-".into(), |b| b.to_string()),
            format!("{:.2} s", r.wall_s),
            r.max_unavailable.to_string(),
            r.queued.to_string(),
            format!(
                "{:.3} / {:.3} s",
                r.slot_to_start_p50_s, r.slot_to_start_p99_s
            ),
            format!("{:.2} + {:.2}", r.writes_per_queued, r.events_per_queued),
            r.requests.total.to_string(),
            format!("{:.1} MiB", r.peak_rss_mib),
            format!("{:.2} s", r.cpu_s),
        ]);
    }
    table.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::fleet::observer::Track;

    #[test]
    fn each_freed_slot_pairs_with_the_next_start_in_time_order() {
        let t0 = Instant::now();
        let at = |ms: u64| Some(t0 + Duration::from_millis(ms));
        let mut seen = Seen::default();
        // Two ran first and went at 100 and 300 ms; two waited and started at 150 and 320.
        for (name, started, gone, queued) in [
            ("a", at(0), at(100), false),
            ("b", at(0), at(300), false),
            ("c", at(150), None, true),
            ("d", at(320), None, true),
        ] {
            seen.maintenances.insert(
                name.into(),
                Track {
                    started,
                    gone,
                    queued,
                    ..Track::default()
                },
            );
        }
        assert_eq!(
            slot_to_start(&seen),
            [Duration::from_millis(50), Duration::from_millis(20)]
        );
    }
}
