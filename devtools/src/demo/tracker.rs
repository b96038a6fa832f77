//! Follows every NodeMaintenance through one watch (one LIST and one WATCH for the whole run,
//! whatever the number of nodes) and keeps, per maintenance, what the demo and the benchmarks
//! show: phase, pods left, why they are blocked, and when it was created and first drained.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use nmo::crd::{MaintenancePhase, NodeMaintenance, NodeMaintenanceStatus};

/// What is known of one NodeMaintenance.
#[derive(Debug, Clone, Default)]
pub struct Tracked {
    /// The node it targets.
    pub node: String,
    /// When the driver sent the create request.
    pub created_at: Option<Instant>,
    /// When the watch first showed `phase=Succeeded`.
    pub succeeded_at: Option<Instant>,
    /// The latest status seen.
    pub status: NodeMaintenanceStatus,
    /// The object is gone from the API (deleted and its finalizer removed).
    pub gone: bool,
    /// Each reason its `DrainBlocked` condition showed (True), with when the watch first saw it.
    pub blocked_first_seen: BTreeMap<String, Instant>,
}

impl Tracked {
    /// The phase, if the operator has written one.
    pub fn phase(&self) -> Option<MaintenancePhase> {
        self.status.phase
    }

    /// Whether the drain is complete.
    pub fn succeeded(&self) -> bool {
        self.status.phase == Some(MaintenancePhase::Succeeded)
    }

    /// Pods still to leave the node.
    pub fn pods_left(&self) -> usize {
        self.status
            .pending_pods_refs
            .as_ref()
            .map(Vec::len)
            .or_else(|| self.status.pending_pods.as_ref().map(Vec::len))
            .unwrap_or(0)
    }

    /// Pods the drain removes (`evictionPods`).
    pub fn pods_to_evict(&self) -> u64 {
        self.status
            .eviction_pods
            .and_then(|n| u64::try_from(n).ok())
            .unwrap_or(0)
    }

    /// From the create request to the first Succeeded seen.
    pub fn time_to_drained(&self) -> Option<Duration> {
        Some(
            self.succeeded_at?
                .saturating_duration_since(self.created_at?),
        )
    }

    /// The `DrainBlocked` condition when True: its reason and message.
    pub fn drain_blocked(&self) -> Option<(String, String)> {
        self.status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "DrainBlocked" && c.status == "True")
            .map(|c| (c.reason.clone(), c.message.clone()))
    }

    /// Why the drain is not finished, in one line: the first pending pod's reason (naming the
    /// PodDisruptionBudget when one refuses it), else `lastError`.
    pub fn blocking_reason(&self) -> Option<String> {
        let reasons = self.status.pending_pods_reasons.as_deref().unwrap_or(&[]);
        let first = reasons
            .iter()
            .find(|r| r.pdb.is_some())
            .or_else(|| reasons.first());
        if let Some(r) = first {
            return Some(match &r.pdb {
                Some(pdb) => format!("{} {}/{}: PDB {pdb}", r.reason, r.namespace, r.name),
                None => format!("{} {}/{}", r.reason, r.namespace, r.name),
            });
        }
        self.status
            .last_error
            .as_ref()
            .filter(|e| !e.is_empty())
            .cloned()
    }
}

/// The shared view, updated by the watch task.
#[derive(Clone, Default)]
pub struct Tracker {
    state: Arc<Mutex<BTreeMap<String, Tracked>>>,
    changed: Arc<watch::Sender<u64>>,
}

impl Tracker {
    /// Starts watching every NodeMaintenance with `client`; the task ends when dropped or
    /// aborted through the returned handle.
    pub fn start(client: Client) -> (Tracker, JoinHandle<()>) {
        let tracker = Tracker::default();
        let task = tokio::spawn(tracker.clone().follow(client));
        (tracker, task)
    }

    async fn follow(self, client: Client) {
        let api: Api<NodeMaintenance> = Api::all(client);
        let mut events = watcher::watcher(api, watcher::Config::default()).boxed();
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::Apply(nm)) | Ok(Event::InitApply(nm)) => self.applied(&nm),
                Ok(Event::Delete(nm)) => self.deleted(&nm),
                Ok(Event::Init) | Ok(Event::InitDone) => {}
                // The watcher re-lists by itself after an error; nothing is lost for a view.
                Err(error) => tracing::debug!(%error, "NodeMaintenance watch error"),
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Tracked>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn notify(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn applied(&self, nm: &NodeMaintenance) {
        {
            let mut state = self.lock();
            let entry = state.entry(nm.name_any()).or_default();
            entry.node = nm.spec.node_name.clone();
            entry.gone = false;
            entry.status = nm.status.clone().unwrap_or_default();
            if entry.succeeded() && entry.succeeded_at.is_none() {
                entry.succeeded_at = Some(Instant::now());
            }
            if let Some((reason, _)) = entry.drain_blocked() {
                entry
                    .blocked_first_seen
                    .entry(reason)
                    .or_insert_with(Instant::now);
            }
        }
        self.notify();
    }

    fn deleted(&self, nm: &NodeMaintenance) {
        if let Some(entry) = self.lock().get_mut(&nm.name_any()) {
            entry.gone = true;
        }
        self.notify();
    }

    /// Records that the driver is about to create `name` for `node`.
    pub fn created(&self, name: &str, node: &str, at: Instant) {
        let mut state = self.lock();
        let entry = state.entry(name.to_string()).or_default();
        entry.node = node.to_string();
        entry.created_at = Some(at);
        entry.gone = false;
    }

    /// A copy of everything known, by NodeMaintenance name.
    pub fn snapshot(&self) -> BTreeMap<String, Tracked> {
        self.lock().clone()
    }

    /// Waits until `done` holds for the tracked set, or `timeout` passes (then `false`).
    pub async fn wait_until(
        &self,
        timeout: Duration,
        done: impl Fn(&BTreeMap<String, Tracked>) -> bool,
    ) -> bool {
        let mut changes = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if done(&self.lock()) {
                return true;
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                // The sender lives in `self`, so it cannot be dropped; time is up.
                Ok(Err(_)) | Err(_) => return done(&self.lock()),
            }
        }
    }

    /// A receiver that wakes on every change (for progress displays).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

/// Whether every maintenance in `names` has Succeeded.
pub fn all_succeeded(state: &BTreeMap<String, Tracked>, names: &[String]) -> bool {
    names
        .iter()
        .all(|n| state.get(n).is_some_and(Tracked::succeeded))
}

/// How long each maintenance in `names` took to drain (those that drained).
pub fn drain_times(state: &BTreeMap<String, Tracked>, names: &[String]) -> Vec<Duration> {
    names
        .iter()
        .filter_map(|n| state.get(n).and_then(Tracked::time_to_drained))
        .collect()
}

/// The pods the maintenances in `names` counted to evict when each began.
pub fn pods_to_evict(state: &BTreeMap<String, Tracked>, names: &[String]) -> u64 {
    names
        .iter()
        .filter_map(|n| state.get(n))
        .map(Tracked::pods_to_evict)
        .sum()
}

/// Whether every maintenance in `names` is gone from the API.
pub fn all_gone(state: &BTreeMap<String, Tracked>, names: &[String]) -> bool {
    names.iter().all(|n| state.get(n).is_none_or(|t| t.gone))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmo::crd::PendingPodReason;

    #[test]
    fn the_blocking_reason_prefers_a_pdb_over_other_pending_pods() {
        let tracked = Tracked {
            status: NodeMaintenanceStatus {
                pending_pods_reasons: Some(vec![
                    PendingPodReason {
                        namespace: "w".into(),
                        name: "a".into(),
                        reason: "Terminating".into(),
                        ..Default::default()
                    },
                    PendingPodReason {
                        namespace: "w".into(),
                        name: "b".into(),
                        reason: "BlockedByPodDisruptionBudget".into(),
                        pdb: Some("app-0-pdb".into()),
                        message: String::new(),
                        diagnosis: None,
                    },
                ]),
                last_error: Some("older error".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(
            tracked.blocking_reason().as_deref(),
            Some("BlockedByPodDisruptionBudget w/b: PDB app-0-pdb")
        );
    }

    #[test]
    fn without_pending_reasons_the_last_error_is_the_reason() {
        let mut tracked = Tracked::default();
        assert_eq!(tracked.blocking_reason(), None);
        tracked.status.last_error = Some("lease held by node-healthcheck".into());
        assert_eq!(
            tracked.blocking_reason().as_deref(),
            Some("lease held by node-healthcheck")
        );
    }

    #[test]
    fn time_to_drained_needs_both_ends() {
        let start = Instant::now();
        let mut tracked = Tracked {
            created_at: Some(start),
            ..Default::default()
        };
        assert_eq!(tracked.time_to_drained(), None);
        tracked.succeeded_at = Some(start + Duration::from_millis(1500));
        assert_eq!(tracked.time_to_drained(), Some(Duration::from_millis(1500)));
    }
}
