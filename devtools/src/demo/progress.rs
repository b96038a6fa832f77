//! Live progress while the drains run: one line per node (phase, pods left, what blocks it),
//! or one aggregate bar when there are too many nodes for one line each. Without a terminal it
//! prints a plain status line every second instead, so logs and pasted runs stay readable.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::task::JoinHandle;

use super::tracker::{Tracked, Tracker};

/// Above this many nodes the display is one aggregate bar.
const MAX_NODE_LINES: usize = 16;
/// How often the plain display prints.
const PLAIN_INTERVAL: Duration = Duration::from_secs(1);

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Display {
    /// Bars on a terminal (stderr); falls back to `Plain` when stderr is not a terminal.
    Live,
    /// A status line on stdout every second.
    Plain,
    /// Nothing (tests, benchmarks).
    Quiet,
}

impl Display {
    /// `Live` on a terminal, else `Plain`.
    #[must_use]
    pub fn resolve(self) -> Display {
        match self {
            Display::Live if !std::io::stderr().is_terminal() => Display::Plain,
            other => other,
        }
    }
}

/// A running display; [`Progress::finish`] stops it.
pub struct Progress {
    task: Option<JoinHandle<()>>,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Progress {
    /// Follows the maintenances `names` in the tracker.
    pub fn start(tracker: &Tracker, names: Vec<String>, display: Display) -> Progress {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = match display.resolve() {
            Display::Quiet => None,
            Display::Plain => Some(tokio::spawn(plain(tracker.clone(), names, stopped))),
            Display::Live => Some(tokio::spawn(live(tracker.clone(), names, stopped))),
        };
        Progress { task, stop }
    }

    /// Draws the final state and stops.
    pub async fn finish(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

/// Counts over all followed maintenances.
#[derive(Debug, Default, PartialEq, Eq)]
struct Aggregate {
    succeeded: usize,
    failed: usize,
    running: usize,
    pods_left: usize,
    blocked_by_pdb: usize,
}

fn aggregate(state: &BTreeMap<String, Tracked>, names: &[String]) -> Aggregate {
    let mut total = Aggregate::default();
    for tracked in names.iter().filter_map(|n| state.get(n)) {
        match tracked.phase() {
            Some(nmo::crd::MaintenancePhase::Succeeded) => total.succeeded += 1,
            Some(nmo::crd::MaintenancePhase::Failed) => total.failed += 1,
            _ => total.running += 1,
        }
        total.pods_left += tracked.pods_left();
        if tracked
            .blocking_reason()
            .is_some_and(|r| r.contains("PDB "))
        {
            total.blocked_by_pdb += 1;
        }
    }
    total
}

fn aggregate_line(a: &Aggregate, total: usize, started: Instant) -> String {
    format!(
        "{:>5.1} s  succeeded {}/{total}  running {}  failed {}  pods left {}  blocked by a PDB {}",
        started.elapsed().as_secs_f64(),
        a.succeeded,
        a.running,
        a.failed,
        a.pods_left,
        a.blocked_by_pdb
    )
}

async fn plain(
    tracker: Tracker,
    names: Vec<String>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let started = Instant::now();
    let mut ticks = tokio::time::interval(PLAIN_INTERVAL);
    ticks.tick().await;
    loop {
        let stop = tokio::select! {
            _ = ticks.tick() => false,
            _ = stopped.changed() => true,
        };
        let line = aggregate_line(
            &aggregate(&tracker.snapshot(), &names),
            names.len(),
            started,
        );
        println!("{line}");
        if stop {
            return;
        }
    }
}

fn node_message(tracked: &Tracked) -> String {
    let phase = tracked
        .phase()
        .map(|p| format!("{p:?}"))
        .unwrap_or_else(|| "Pending".to_string());
    match tracked.blocking_reason() {
        Some(reason) if !tracked.succeeded() => format!("{phase:<9} {reason}"),
        _ => phase,
    }
}

async fn live(
    tracker: Tracker,
    names: Vec<String>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(10));
    let started = Instant::now();
    let mut changes = tracker.subscribe();
    let mut ticks = tokio::time::interval(Duration::from_millis(200));
    if names.len() > MAX_NODE_LINES {
        let bar = multi.add(ProgressBar::new(names.len() as u64));
        bar.set_style(
            ProgressStyle::with_template("{bar:30.green/white} {pos}/{len} nodes drained  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        loop {
            let a = aggregate(&tracker.snapshot(), &names);
            bar.set_position(a.succeeded as u64);
            bar.set_message(aggregate_line(&a, names.len(), started));
            if *stopped.borrow() {
                bar.finish();
                return;
            }
            tokio::select! {
                _ = changes.changed() => {}
                _ = ticks.tick() => {}
                _ = stopped.changed() => {}
            }
        }
    }
    let style = ProgressStyle::with_template(
        "{prefix:>10} {bar:20.cyan/blue} {pos:>3}/{len:<3} pods out  {msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    let bars: Vec<ProgressBar> = names
        .iter()
        .map(|_| {
            let bar = multi.add(ProgressBar::new(0));
            bar.set_style(style.clone());
            bar
        })
        .collect();
    loop {
        let state = tracker.snapshot();
        for (name, bar) in names.iter().zip(&bars) {
            let Some(tracked) = state.get(name) else {
                continue;
            };
            let to_evict = tracked.pods_to_evict();
            bar.set_prefix(tracked.node.clone());
            bar.set_length(to_evict);
            bar.set_position(to_evict.saturating_sub(tracked.pods_left() as u64));
            bar.set_message(node_message(tracked));
        }
        if *stopped.borrow() {
            for bar in &bars {
                bar.finish();
            }
            return;
        }
        tokio::select! {
            _ = changes.changed() => {}
            _ = ticks.tick() => {}
            _ = stopped.changed() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmo::crd::{MaintenancePhase, NodeMaintenanceStatus, PodReference};

    fn tracked(phase: MaintenancePhase, left: usize) -> Tracked {
        Tracked {
            status: NodeMaintenanceStatus {
                phase: Some(phase),
                pending_pods_refs: Some(vec![PodReference::default(); left]),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn the_aggregate_counts_phases_and_pods_left() {
        let mut state = BTreeMap::new();
        state.insert("a".to_string(), tracked(MaintenancePhase::Succeeded, 0));
        state.insert("b".to_string(), tracked(MaintenancePhase::Running, 3));
        state.insert("c".to_string(), tracked(MaintenancePhase::Failed, 1));
        let names: Vec<String> = ["a", "b", "c", "missing"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            aggregate(&state, &names),
            Aggregate {
                succeeded: 1,
                failed: 1,
                running: 1,
                pods_left: 4,
                blocked_by_pdb: 0
            }
        );
    }
}
