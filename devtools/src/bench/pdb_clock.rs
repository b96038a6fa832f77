//! Time from "the budget allows" to "the eviction is accepted", read from the simulated API
//! server's own store: a PodDisruptionBudget whose `disruptionsAllowed` rises above zero
//! starts the clock, and each eviction it then accepts (the API records it in `disruptedPods`
//! and takes it off `disruptionsAllowed` in the same write) stops one. Evictions that a budget
//! refuses never reach the store, so only the useful calls are timed. Also: when the last
//! eviction was accepted.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nmo_sim::SimHandle;
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

/// What was measured.
#[derive(Debug, Clone, Default)]
pub struct PdbTimes {
    /// From "allows" (or from the start, if it allowed already) to each eviction it accepted.
    pub allow_to_evict: Vec<Duration>,
    /// When the last eviction was accepted.
    pub last_eviction: Option<Instant>,
    /// Store events missed because the recorder fell behind.
    pub lagged: u64,
}

#[derive(Default)]
struct TrackedPdb {
    allowed_since: Option<Instant>,
    disrupted: BTreeSet<String>,
}

/// Records from now on, counting from `start` at the earliest.
pub struct PdbClock {
    times: Arc<Mutex<PdbTimes>>,
    task: JoinHandle<()>,
}

fn status_of(pdb: &Value) -> (i64, BTreeSet<String>) {
    let allowed = pdb
        .pointer("/status/disruptionsAllowed")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let disrupted = pdb
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
        .map(|d| d.keys().cloned().collect())
        .unwrap_or_default();
    (allowed, disrupted)
}

impl PdbClock {
    /// Starts following `sim`'s store; budgets allowing already count from `start`.
    pub fn start(sim: &SimHandle, start: Instant) -> PdbClock {
        let mut events = sim.store().subscribe();
        let times = Arc::new(Mutex::new(PdbTimes::default()));
        let mut tracked_pdbs: BTreeMap<String, TrackedPdb> = BTreeMap::new();
        for pdb in sim.list_json("policy", "poddisruptionbudgets", "") {
            let key = format!(
                "{}/{}",
                pdb.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
                pdb.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            );
            let (allowed, disrupted) = status_of(&pdb);
            tracked_pdbs.insert(
                key,
                TrackedPdb {
                    allowed_since: (allowed > 0).then_some(start),
                    disrupted,
                },
            );
        }
        let shared = times.clone();
        let task = tokio::spawn(async move {
            loop {
                let event = match events.recv().await {
                    Ok(event) => event,
                    Err(RecvError::Lagged(n)) => {
                        shared.lock().unwrap_or_else(|e| e.into_inner()).lagged += n;
                        continue;
                    }
                    Err(RecvError::Closed) => return,
                };
                if (event.def.group.as_str(), event.def.plural.as_str())
                    != ("policy", "poddisruptionbudgets")
                {
                    continue;
                }
                let Ok(pdb) = event.obj.value() else { continue };
                let now = Instant::now();
                let key = format!("{}/{}", event.obj.namespace, event.obj.name);
                let tracked = tracked_pdbs.entry(key).or_default();
                let (allowed, disrupted) = status_of(&pdb);
                let accepted = disrupted.difference(&tracked.disrupted).count();
                if accepted > 0 {
                    let mut times = shared.lock().unwrap_or_else(|e| e.into_inner());
                    times.last_eviction = Some(now);
                    if let Some(since) = tracked.allowed_since {
                        let waited = now.saturating_duration_since(since.max(start));
                        times
                            .allow_to_evict
                            .extend(std::iter::repeat_n(waited, accepted));
                    }
                }
                tracked.allowed_since = match (allowed > 0, tracked.allowed_since) {
                    (false, _) => None,
                    (true, Some(since)) => Some(since),
                    (true, None) => Some(now),
                };
                tracked.disrupted = disrupted;
            }
        });
        PdbClock { times, task }
    }

    /// Stops recording and returns what was measured.
    pub fn finish(self) -> PdbTimes {
        self.task.abort();
        self.times.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
