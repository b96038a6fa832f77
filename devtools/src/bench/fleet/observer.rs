//! The driver's view of a fleet run: every NodeMaintenance through one watch (when it was
//! created, started, succeeded and gone, and the writes it saw while it waited) and every node
//! through the node summary watch (the most unavailable at once).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use nmo_actors::model::NodeSummaryEvent;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use nmo::cluster::node_hub::NodeHub;
use nmo::cluster::watch::InitialLists;
use nmo::cluster::watch_health::WatchHealth;
use nmo::crd::{FINALIZER, MaintenancePhase, NodeMaintenance};

/// One NodeMaintenance as the driver saw it.
#[derive(Debug, Clone, Default)]
pub struct Track {
    /// The create request left.
    pub created: Option<Instant>,
    /// Its finalizer appeared: its node actor started.
    pub started: Option<Instant>,
    /// First seen Succeeded.
    pub succeeded: Option<Instant>,
    /// Gone from the API.
    pub gone: Option<Instant>,
    /// The driver asked to delete it.
    pub delete_asked: bool,
    /// It was seen waiting in the queue.
    pub queued: bool,
    /// Changes seen before it started (its creation not included): nmo's writes while it
    /// waited.
    pub writes_while_waiting: u64,
    /// The resourceVersion last seen.
    pub(super) resource_version: String,
}

/// What the driver saw.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// By NodeMaintenance name.
    pub maintenances: BTreeMap<String, Track>,
    /// Nodes NotReady or cordoned now.
    pub unavailable: BTreeSet<String>,
    /// The most nodes unavailable at once.
    pub max_unavailable: usize,
    /// Every node has been listed.
    pub nodes_listed: bool,
}

/// The shared view, fed by two watch tasks.
#[derive(Clone, Default)]
pub struct Observer {
    seen: Arc<Mutex<Seen>>,
    changed: Arc<watch::Sender<u64>>,
}

impl Observer {
    /// Starts both watches with `client`; the tasks end when aborted.
    pub fn start(client: &Client) -> (Observer, Vec<JoinHandle<()>>) {
        let observer = Observer::default();
        let nms = tokio::spawn(observer.clone().follow_maintenances(client.clone()));
        let nodes = tokio::spawn(observer.clone().follow_nodes(client.clone()));
        (observer, vec![nms, nodes])
    }

    fn lock(&self) -> MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn notify(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    async fn follow_maintenances(self, client: Client) {
        let api: Api<NodeMaintenance> = Api::all(client);
        let mut events = watcher::watcher(api, watcher::Config::default()).boxed();
        while let Some(event) = events.next().await {
            let now = Instant::now();
            match event {
                Ok(Event::Apply(nm) | Event::InitApply(nm)) => self.applied(&nm, now),
                Ok(Event::Delete(nm)) => {
                    if let Some(track) = self.lock().maintenances.get_mut(&nm.name_any()) {
                        track.gone.get_or_insert(now);
                    }
                }
                Ok(Event::Init | Event::InitDone) => {}
                Err(error) => tracing::debug!(%error, "NodeMaintenance watch error"),
            }
            self.notify();
        }
    }

    fn applied(&self, nm: &NodeMaintenance, now: Instant) {
        let mut seen = self.lock();
        let track = seen.maintenances.entry(nm.name_any()).or_default();
        let version = nm.resource_version().unwrap_or_default();
        let first = track.resource_version.is_empty();
        let changed = version != track.resource_version;
        track.resource_version = version;
        let started = nm.finalizers().iter().any(|f| f == FINALIZER);
        if started {
            track.started.get_or_insert(now);
        } else if changed && !first {
            track.writes_while_waiting += 1;
        }
        let status = nm.status.as_ref();
        if status.and_then(|s| s.queue.as_ref()).is_some() {
            track.queued = true;
        }
        if status.and_then(|s| s.phase) == Some(MaintenancePhase::Succeeded) {
            track.succeeded.get_or_insert(now);
        }
    }

    async fn follow_nodes(self, client: Client) {
        // The hub stops its watch when dropped: it lives as long as this loop.
        let nodes = NodeHub::new(client, InitialLists::default(), WatchHealth::default());
        let mut events = nodes.summaries();
        while let Some(event) = events.next().await {
            {
                let mut seen = self.lock();
                match event {
                    NodeSummaryEvent::Listed(nodes) => {
                        seen.unavailable = nodes
                            .into_iter()
                            .filter(|n| n.unavailable())
                            .map(|n| n.name.to_string())
                            .collect();
                        seen.nodes_listed = true;
                    }
                    NodeSummaryEvent::Changed(node) if node.unavailable() => {
                        seen.unavailable.insert(node.name.to_string());
                    }
                    NodeSummaryEvent::Changed(node) => {
                        seen.unavailable.remove(node.name.as_str());
                    }
                    NodeSummaryEvent::Deleted(name) => {
                        seen.unavailable.remove(name.as_str());
                    }
                }
                seen.max_unavailable = seen.max_unavailable.max(seen.unavailable.len());
            }
            self.notify();
        }
    }

    /// Records that the driver is about to create `name`.
    pub fn created(&self, name: &str, at: Instant) {
        self.lock()
            .maintenances
            .entry(name.to_string())
            .or_default()
            .created = Some(at);
    }

    /// A copy of what was seen.
    pub fn snapshot(&self) -> Seen {
        self.lock().clone()
    }

    /// Marks the Succeeded ones not yet asked to be deleted, and returns their names.
    pub fn take_to_delete(&self) -> Vec<String> {
        let mut seen = self.lock();
        seen.maintenances
            .iter_mut()
            .filter(|(_, t)| t.succeeded.is_some() && !t.delete_asked)
            .map(|(name, t)| {
                t.delete_asked = true;
                name.clone()
            })
            .collect()
    }

    /// Waits for the next change, at most `timeout`.
    pub async fn changed(&self, timeout: Duration) {
        let mut changes = self.changed.subscribe();
        let _ = tokio::time::timeout(timeout, changes.changed()).await;
    }

    /// Waits until the node watch has listed every node.
    pub async fn nodes_listed(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.lock().nodes_listed {
            if Instant::now() > deadline {
                return false;
            }
            self.changed(Duration::from_millis(100)).await;
        }
        true
    }
}
