//! The drain policy figures of a budgeted scenario: refused evictions per evicted pod, the
//! time from "the budget allows" to "the eviction is accepted", the drain against its floor,
//! and the diagnosis each blocked maintenance showed (and how soon), with the targets.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::figures::{Target, percentile, target};
use super::interactions::ExpectedBlock;
use super::pdb_clock::PdbTimes;
use crate::demo::tracker::Tracked;

/// Refused evictions allowed per evicted pod in c.
pub const REFUSALS_PER_POD: f64 = 0.5;
/// c's evictions must be done within this many times their floor.
pub const FLOOR_FACTOR: f64 = 1.5;
/// A structural budget or a deadlock must be named within this long.
pub const DIAGNOSED_WITHIN: Duration = Duration::from_secs(10);

/// What one maintenance showed.
#[derive(Debug, Clone, Serialize)]
pub struct Diagnosis {
    /// The NodeMaintenance.
    pub maintenance: String,
    /// Its phase at the end.
    pub phase: String,
    /// Every `DrainBlocked` reason it showed, with when it first showed it (seconds after its
    /// creation).
    pub showed: Vec<(String, f64)>,
    /// Its `DrainBlocked` message at the end, if blocked.
    pub message: Option<String>,
    /// What it had to show, if it had to end blocked.
    pub expected: Option<String>,
    /// When it first showed the expected reason with the expected words (seconds after its
    /// creation).
    pub correct_after_s: Option<f64>,
}

/// The drain policy figures of one scenario.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyFigures {
    /// Evictions refused (429).
    pub refused: u64,
    /// `refused / evicted pods`.
    pub refused_per_evicted_pod: f64,
    /// Evictions accepted while their budget allowed, timed.
    pub timed_evictions: usize,
    /// From "the budget allows" to "the eviction is accepted": median, ms.
    pub allow_to_evict_p50_ms: f64,
    /// The same, 99th percentile, ms.
    pub allow_to_evict_p99_ms: f64,
    /// The most pods of one (drainable) budget on the maintained nodes.
    pub pods_per_budget: usize,
    /// A replacement's start-up time, s.
    pub startup_s: f64,
    /// The floor: start-up time x pods per budget, s.
    pub floor_s: f64,
    /// From the creations to the last eviction accepted, s.
    pub evictions_done_s: Option<f64>,
    /// The grace period the last evicted pod terminates in, s (the floor of "Succeeded" is
    /// `floor_s` plus this).
    pub grace_s: f64,
    /// API reads nmo spent explaining blocked budgets (its own counter), if scraped.
    pub diagnosis_reads: Option<u64>,
    /// Per maintenance.
    pub diagnoses: Vec<Diagnosis>,
}

/// What a scenario's run gives the figures.
pub struct PolicyInputs<'a> {
    /// When the maintenances were created.
    pub started: Instant,
    /// Refused evictions.
    pub refused: u64,
    /// Pods evicted.
    pub evicted_pods: u64,
    /// The budget clock's measurements.
    pub times: PdbTimes,
    /// The most pods of one drainable budget on the maintained nodes.
    pub pods_per_budget: usize,
    /// Start-up time of a replacement.
    pub startup: Duration,
    /// Grace period of an evicted pod.
    pub grace: Duration,
    /// The maintenances as last seen.
    pub state: &'a BTreeMap<String, Tracked>,
    /// The maintenances of the scenario.
    pub names: &'a [String],
    /// What the trapped ones must show.
    pub expected: &'a [ExpectedBlock],
    /// nmo's diagnosis reads.
    pub diagnosis_reads: Option<u64>,
}

/// Whether a maintenance shows what `expected` says.
pub fn shows(tracked: &Tracked, expected: &ExpectedBlock) -> bool {
    tracked.drain_blocked().is_some_and(|(reason, message)| {
        reason == expected.reason && message.contains(&expected.mentions)
    })
}

impl PolicyFigures {
    /// Puts the figures together.
    pub fn new(inputs: PolicyInputs<'_>) -> Self {
        let ms = |q| percentile(&inputs.times.allow_to_evict, q) * 1000.0;
        let diagnoses = inputs
            .names
            .iter()
            .filter_map(|name| inputs.state.get(name).map(|t| (name, t)))
            .map(|(name, tracked)| diagnosis(name, tracked, inputs.expected))
            .collect();
        PolicyFigures {
            refused: inputs.refused,
            refused_per_evicted_pod: inputs.refused as f64 / inputs.evicted_pods.max(1) as f64,
            timed_evictions: inputs.times.allow_to_evict.len(),
            allow_to_evict_p50_ms: ms(0.5),
            allow_to_evict_p99_ms: ms(0.99),
            pods_per_budget: inputs.pods_per_budget,
            startup_s: inputs.startup.as_secs_f64(),
            floor_s: inputs.startup.as_secs_f64() * inputs.pods_per_budget as f64,
            evictions_done_s: inputs
                .times
                .last_eviction
                .map(|at| at.saturating_duration_since(inputs.started).as_secs_f64()),
            grace_s: inputs.grace.as_secs_f64(),
            diagnosis_reads: inputs.diagnosis_reads,
            diagnoses,
        }
    }

    /// The targets of issue 15 that apply to scenario `name`.
    pub fn targets(&self, name: &str) -> Vec<Target> {
        let mut out = Vec::new();
        if name == "c" {
            out.push(target(
                "refused evictions per evicted pod",
                format!("<= {REFUSALS_PER_POD}"),
                format!(
                    "{:.2} ({} in all)",
                    self.refused_per_evicted_pod, self.refused
                ),
                self.refused_per_evicted_pod <= REFUSALS_PER_POD,
            ));
            let done = self.evictions_done_s.unwrap_or(f64::INFINITY);
            out.push(target(
                "evictions done vs floor (start-up x pods per budget)",
                format!("<= {FLOOR_FACTOR} x {:.1} s", self.floor_s),
                format!(
                    "{done:.1} s (x{:.2})",
                    done / self.floor_s.max(f64::EPSILON)
                ),
                done <= FLOOR_FACTOR * self.floor_s,
            ));
        }
        for d in self.diagnoses.iter().filter(|d| d.expected.is_some()) {
            let within = DIAGNOSED_WITHIN.as_secs_f64();
            let met = d.correct_after_s.is_some_and(|s| s <= within);
            out.push(target(
                &format!("{} diagnosed", d.maintenance),
                format!(
                    "{} within {within:.0} s",
                    d.expected.clone().unwrap_or_default()
                ),
                match d.correct_after_s {
                    Some(s) => format!("after {s:.1} s"),
                    None => "never".into(),
                },
                met,
            ));
        }
        out
    }
}

fn diagnosis(name: &str, tracked: &Tracked, expected: &[ExpectedBlock]) -> Diagnosis {
    let created = tracked.created_at;
    let after =
        |at: Instant| created.map_or(0.0, |c| at.saturating_duration_since(c).as_secs_f64());
    let mut showed: Vec<(String, f64)> = tracked
        .blocked_first_seen
        .iter()
        .map(|(reason, at)| (reason.clone(), after(*at)))
        .collect();
    showed.sort_by(|a, b| a.1.total_cmp(&b.1));
    let expect = expected.iter().find(|e| e.maintenance == name);
    let correct_after_s = expect.and_then(|e| {
        // The first time the watch saw the expected reason; its words are checked at the end.
        let at = tracked.blocked_first_seen.get(e.reason)?;
        shows(tracked, e).then(|| after(*at))
    });
    Diagnosis {
        maintenance: name.to_string(),
        phase: tracked
            .phase()
            .map(|p| format!("{p:?}"))
            .unwrap_or_else(|| "-".into()),
        showed,
        message: tracked.drain_blocked().map(|(_, m)| m),
        expected: expect.map(|e| format!("{} naming {}", e.reason, e.mentions)),
        correct_after_s,
    }
}
