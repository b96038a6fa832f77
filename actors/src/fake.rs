//! An in-memory [`Cluster`] for tests: nodes, pods, leases, NodeMaintenances, DaemonSets and
//! events, with every call recorded and scriptable outcomes (errors per operation, eviction
//! outcomes per pod, PodDisruptionBudgets that refuse evictions).
//!
//! It also plays the controller's watch: [`FakeCluster::subscribe_maintenances`] yields every
//! NodeMaintenance change, so a test can feed the supervisor like the real controller does.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::stream::{self, BoxStream, StreamExt};
use tokio::sync::mpsc;

use crate::model::{
    Event, FINALIZER, Lease, Maintenance, MaintenanceStatus, NodeOwner, NodePatch, NodeState,
    PodInfo, PodPhase, PodRef,
};
use crate::ports::{Cluster, ClusterError, EvictionOutcome};

/// A change of a NodeMaintenance, as the controller's watch reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MaintenanceChange {
    /// Created or changed.
    Upsert(Box<Maintenance>),
    /// Gone.
    Deleted(String),
}

/// A PodDisruptionBudget simulation: refuses evictions of its pods while `allowed` is 0.
#[derive(Debug, Clone)]
struct Pdb {
    name: String,
    namespace: String,
    pods: HashSet<String>,
    allowed: u32,
}

#[derive(Default)]
struct Inner {
    nodes: BTreeMap<String, NodeState>,
    /// Pods by node name.
    pods: BTreeMap<String, Vec<PodInfo>>,
    leases: BTreeMap<(String, String), Lease>,
    lease_owners: BTreeMap<(String, String), NodeOwner>,
    namespaces: HashSet<String>,
    maintenances: BTreeMap<String, Maintenance>,
    daemonsets: HashSet<(String, String)>,
    events: Vec<Event>,
    calls: Vec<String>,
    errors: HashMap<String, VecDeque<ClusterError>>,
    evictions: HashMap<PodRef, VecDeque<EvictionOutcome>>,
    pdbs: Vec<Pdb>,
    /// Evicted pods are removed at once unless this is set (then they only become terminating).
    evicted_pods_linger: bool,
    version: u64,
    node_watchers: Vec<(String, mpsc::UnboundedSender<Option<NodeState>>)>,
    pod_watchers: Vec<(String, mpsc::UnboundedSender<Vec<PodInfo>>)>,
    nm_watchers: Vec<mpsc::UnboundedSender<MaintenanceChange>>,
}

impl Inner {
    fn next_version(&mut self) -> String {
        self.version += 1;
        self.version.to_string()
    }

    fn take_error(&mut self, op: &str) -> Option<ClusterError> {
        self.errors.get_mut(op).and_then(VecDeque::pop_front)
    }

    fn notify_node(&mut self, name: &str) {
        let snapshot = self.nodes.get(name).cloned();
        self.node_watchers
            .retain(|(n, tx)| n != name || tx.send(snapshot.clone()).is_ok());
    }

    fn notify_pods(&mut self, node: &str) {
        let snapshot = self.pods.get(node).cloned().unwrap_or_default();
        self.pod_watchers
            .retain(|(n, tx)| n != node || tx.send(snapshot.clone()).is_ok());
    }

    fn notify_nm(&mut self, change: MaintenanceChange) {
        self.nm_watchers
            .retain(|tx| tx.send(change.clone()).is_ok());
    }

    fn touch_nm(&mut self, name: &str) {
        let version = self.next_version();
        let Some(nm) = self.maintenances.get_mut(name) else {
            return;
        };
        nm.resource_version = version;
        if nm.deleting && nm.finalizers.is_empty() {
            self.maintenances.remove(name);
            self.notify_nm(MaintenanceChange::Deleted(name.to_string()));
        } else {
            let nm = nm.clone();
            self.notify_nm(MaintenanceChange::Upsert(Box::new(nm)));
        }
    }

    fn find_pod(&self, namespace: &str, name: &str) -> Option<(String, usize)> {
        self.pods.iter().find_map(|(node, pods)| {
            pods.iter()
                .position(|p| p.namespace == namespace && p.name == name)
                .map(|i| (node.clone(), i))
        })
    }

    fn remove_pod(&mut self, namespace: &str, name: &str) -> bool {
        let Some((node, index)) = self.find_pod(namespace, name) else {
            return false;
        };
        if let Some(pods) = self.pods.get_mut(&node) {
            pods.remove(index);
        }
        self.notify_pods(&node);
        true
    }
}

/// The in-memory cluster. Cheap to clone (shared state).
#[derive(Clone, Default)]
pub struct FakeCluster {
    inner: Arc<Mutex<Inner>>,
}

impl FakeCluster {
    /// An empty cluster.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panicking test thread may poison the lock; the data is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn record(&self, call: String) -> MutexGuard<'_, Inner> {
        let mut inner = self.lock();
        inner.calls.push(call);
        inner
    }

    // --- setup --------------------------------------------------------------------------------

    /// Adds or replaces a node.
    pub fn add_node(&self, name: &str) {
        let mut inner = self.lock();
        let version = inner.next_version();
        inner.nodes.insert(
            name.to_string(),
            NodeState {
                name: name.to_string(),
                uid: format!("uid-{name}"),
                resource_version: version,
                ..NodeState::default()
            },
        );
        inner.notify_node(name);
    }

    /// Replaces a node's state (e.g. someone uncordons it).
    pub fn set_node(&self, node: NodeState) {
        let mut inner = self.lock();
        let name = node.name.clone();
        let version = inner.next_version();
        inner.nodes.insert(
            name.clone(),
            NodeState {
                resource_version: version,
                ..node
            },
        );
        inner.notify_node(&name);
    }

    /// A node's state.
    pub fn node(&self, name: &str) -> Option<NodeState> {
        self.lock().nodes.get(name).cloned()
    }

    /// Adds a running pod on a node, controlled by a ReplicaSet.
    pub fn add_pod(&self, node: &str, namespace: &str, name: &str) {
        self.add_pod_info(
            node,
            PodInfo {
                namespace: namespace.to_string(),
                name: name.to_string(),
                uid: format!("uid-{namespace}-{name}"),
                phase: PodPhase::Running,
                controller: Some(crate::model::OwnerRef {
                    kind: "ReplicaSet".to_string(),
                    name: format!("{name}-rs"),
                }),
                is_mirror: false,
                has_empty_dir: false,
                terminating: false,
                grace_period_seconds: Some(30),
            },
        );
    }

    /// Adds a pod on a node.
    pub fn add_pod_info(&self, node: &str, pod: PodInfo) {
        let mut inner = self.lock();
        inner.pods.entry(node.to_string()).or_default().push(pod);
        inner.notify_pods(node);
    }

    /// Removes a pod (as if its controller or kubelet removed it).
    pub fn remove_pod(&self, namespace: &str, name: &str) -> bool {
        self.lock().remove_pod(namespace, name)
    }

    /// Pods on a node.
    pub fn pods(&self, node: &str) -> Vec<PodInfo> {
        self.lock().pods.get(node).cloned().unwrap_or_default()
    }

    /// Declares a DaemonSet as existing.
    pub fn add_daemonset(&self, namespace: &str, name: &str) {
        self.lock()
            .daemonsets
            .insert((namespace.to_string(), name.to_string()));
    }

    /// Adds a PodDisruptionBudget covering `pods` (names in `namespace`) allowing `allowed`
    /// disruptions; each eviction consumes one.
    pub fn add_pdb(&self, namespace: &str, name: &str, pods: &[&str], allowed: u32) {
        self.lock().pdbs.push(Pdb {
            name: name.to_string(),
            namespace: namespace.to_string(),
            pods: pods.iter().map(|p| p.to_string()).collect(),
            allowed,
        });
    }

    /// Sets how many disruptions a budget allows now.
    pub fn set_pdb_allowed(&self, namespace: &str, name: &str, allowed: u32) {
        let mut inner = self.lock();
        for pdb in inner
            .pdbs
            .iter_mut()
            .filter(|p| p.namespace == namespace && p.name == name)
        {
            pdb.allowed = allowed;
        }
    }

    /// Scripts the next outcomes of evicting one pod (used before the PDB simulation).
    pub fn script_evictions(&self, namespace: &str, name: &str, outcomes: Vec<EvictionOutcome>) {
        self.lock().evictions.insert(
            PodRef {
                namespace: namespace.to_string(),
                name: name.to_string(),
            },
            outcomes.into(),
        );
    }

    /// Makes the next calls of `op` (a `Cluster` method name) fail with these errors.
    pub fn fail_next(&self, op: &str, errors: Vec<ClusterError>) {
        self.lock()
            .errors
            .entry(op.to_string())
            .or_default()
            .extend(errors);
    }

    /// Evicted pods only become terminating instead of disappearing at once.
    pub fn set_evicted_pods_linger(&self, linger: bool) {
        self.lock().evicted_pods_linger = linger;
    }

    /// Puts a lease in place (e.g. held by another operator).
    pub fn put_lease(&self, lease: Lease) {
        let mut inner = self.lock();
        let version = inner.next_version();
        inner.namespaces.insert(lease.namespace.clone());
        inner.leases.insert(
            (lease.namespace.clone(), lease.name.clone()),
            Lease {
                resource_version: version,
                ..lease
            },
        );
    }

    /// A lease.
    pub fn lease(&self, namespace: &str, name: &str) -> Option<Lease> {
        self.lock()
            .leases
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// The owner recorded when a lease was created.
    pub fn lease_owner(&self, namespace: &str, name: &str) -> Option<NodeOwner> {
        self.lock()
            .lease_owners
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Creates a NodeMaintenance (no status, no finalizer).
    pub fn create_maintenance(
        &self,
        name: &str,
        node: &str,
        created: DateTime<Utc>,
    ) -> Maintenance {
        let mut inner = self.lock();
        let version = inner.next_version();
        let nm = Maintenance {
            name: name.to_string(),
            uid: format!("uid-{name}"),
            resource_version: version,
            node_name: node.to_string(),
            reason: "test".to_string(),
            creation_timestamp: created,
            deleting: false,
            finalizers: Vec::new(),
            status: None,
        };
        inner.maintenances.insert(name.to_string(), nm.clone());
        inner.notify_nm(MaintenanceChange::Upsert(Box::new(nm.clone())));
        nm
    }

    /// Puts a NodeMaintenance as-is (e.g. with a status from before a crash).
    pub fn put_maintenance(&self, nm: Maintenance) {
        let mut inner = self.lock();
        let name = nm.name.clone();
        inner.maintenances.insert(name.clone(), nm);
        inner.touch_nm(&name);
    }

    /// Deletes a NodeMaintenance: sets deletionTimestamp, or removes it without finalizers.
    pub fn delete_maintenance(&self, name: &str) {
        let mut inner = self.lock();
        if let Some(nm) = inner.maintenances.get_mut(name) {
            nm.deleting = true;
        }
        inner.touch_nm(name);
    }

    /// A NodeMaintenance.
    pub fn maintenance(&self, name: &str) -> Option<Maintenance> {
        self.lock().maintenances.get(name).cloned()
    }

    /// The status of a NodeMaintenance (default if none).
    pub fn status(&self, name: &str) -> MaintenanceStatus {
        self.maintenance(name)
            .and_then(|nm| nm.status)
            .unwrap_or_default()
    }

    /// Every NodeMaintenance change from now on.
    pub fn subscribe_maintenances(&self) -> mpsc::UnboundedReceiver<MaintenanceChange> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut inner = self.lock();
        for nm in inner.maintenances.values() {
            let _ = tx.send(MaintenanceChange::Upsert(Box::new(nm.clone())));
        }
        inner.nm_watchers.push(tx);
        rx
    }

    /// Events emitted so far.
    pub fn events(&self) -> Vec<Event> {
        self.lock().events.clone()
    }

    /// Reasons of events emitted so far, in order.
    pub fn event_reasons(&self) -> Vec<String> {
        self.lock()
            .events
            .iter()
            .map(|e| e.reason.clone())
            .collect()
    }

    /// Every call so far, as `"<method> <args>"`.
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }

    /// How many calls start with `prefix` (e.g. `"evict_pod"`, `"evict_pod ns/p1"`).
    pub fn count_calls(&self, prefix: &str) -> usize {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.starts_with(prefix))
            .count()
    }
}

fn snapshots<T: Send + 'static>(
    initial: T,
    rx: mpsc::UnboundedReceiver<T>,
) -> BoxStream<'static, T> {
    let rest = stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|v| (v, rx)) });
    stream::once(async move { initial }).chain(rest).boxed()
}

#[async_trait]
impl Cluster for FakeCluster {
    async fn get_maintenance(&self, name: &str) -> Result<Option<Maintenance>, ClusterError> {
        let mut inner = self.record(format!("get_maintenance {name}"));
        if let Some(err) = inner.take_error("get_maintenance") {
            return Err(err);
        }
        Ok(inner.maintenances.get(name).cloned())
    }

    async fn add_finalizer(&self, name: &str, _seen: &[String]) -> Result<(), ClusterError> {
        let mut inner = self.record(format!("add_finalizer {name}"));
        if let Some(err) = inner.take_error("add_finalizer") {
            return Err(err);
        }
        let nm = inner
            .maintenances
            .get_mut(name)
            .ok_or_else(|| ClusterError::NotFound(name.to_string()))?;
        if !nm.has_finalizer() {
            nm.finalizers.push(FINALIZER.to_string());
            inner.touch_nm(name);
        }
        Ok(())
    }

    async fn remove_finalizer(&self, name: &str) -> Result<(), ClusterError> {
        let mut inner = self.record(format!("remove_finalizer {name}"));
        if let Some(err) = inner.take_error("remove_finalizer") {
            return Err(err);
        }
        let Some(nm) = inner.maintenances.get_mut(name) else {
            return Ok(());
        };
        if nm.has_finalizer() {
            nm.finalizers.retain(|f| f != FINALIZER);
            inner.touch_nm(name);
        }
        Ok(())
    }

    async fn write_status(
        &self,
        name: &str,
        status: &MaintenanceStatus,
    ) -> Result<(), ClusterError> {
        let mut inner = self.record(format!("write_status {name}"));
        if let Some(err) = inner.take_error("write_status") {
            return Err(err);
        }
        let nm = inner
            .maintenances
            .get_mut(name)
            .ok_or_else(|| ClusterError::NotFound(name.to_string()))?;
        nm.status = Some(status.clone());
        inner.touch_nm(name);
        Ok(())
    }

    async fn emit_event(&self, event: &Event) -> Result<(), ClusterError> {
        let mut inner = self.record(format!("emit_event {}", event.reason));
        if let Some(err) = inner.take_error("emit_event") {
            return Err(err);
        }
        inner.events.push(event.clone());
        Ok(())
    }

    async fn get_node(&self, name: &str) -> Result<Option<NodeState>, ClusterError> {
        let mut inner = self.record(format!("get_node {name}"));
        if let Some(err) = inner.take_error("get_node") {
            return Err(err);
        }
        Ok(inner.nodes.get(name).cloned())
    }

    async fn patch_node(&self, patch: &NodePatch) -> Result<NodeState, ClusterError> {
        let mut inner = self.record(format!("patch_node {}", patch.node));
        if let Some(err) = inner.take_error("patch_node") {
            return Err(err);
        }
        let version = inner.next_version();
        let node = inner
            .nodes
            .get_mut(&patch.node)
            .ok_or_else(|| ClusterError::NotFound(patch.node.clone()))?;
        if node.taints != patch.expected_taints {
            return Err(ClusterError::Conflict(format!(
                "test of /spec/taints failed on node {}",
                patch.node
            )));
        }
        node.taints = patch.desired_taints.clone();
        if let Some(unschedulable) = patch.unschedulable {
            node.unschedulable = unschedulable;
        }
        for (key, value) in &patch.labels {
            match value {
                Some(value) => {
                    node.labels.insert(key.clone(), value.clone());
                }
                None => {
                    node.labels.remove(key);
                }
            }
        }
        node.resource_version = version;
        let node = node.clone();
        inner.notify_node(&patch.node);
        Ok(node)
    }

    fn watch_node(&self, name: &str) -> BoxStream<'static, Option<NodeState>> {
        let mut inner = self.record(format!("watch_node {name}"));
        let (tx, rx) = mpsc::unbounded_channel();
        inner.node_watchers.push((name.to_string(), tx));
        snapshots(inner.nodes.get(name).cloned(), rx)
    }

    async fn ensure_namespace(&self, namespace: &str) -> Result<(), ClusterError> {
        let mut inner = self.record(format!("ensure_namespace {namespace}"));
        if let Some(err) = inner.take_error("ensure_namespace") {
            return Err(err);
        }
        inner.namespaces.insert(namespace.to_string());
        Ok(())
    }

    async fn get_lease(&self, namespace: &str, name: &str) -> Result<Option<Lease>, ClusterError> {
        let mut inner = self.record(format!("get_lease {namespace}/{name}"));
        if let Some(err) = inner.take_error("get_lease") {
            return Err(err);
        }
        Ok(inner
            .leases
            .get(&(namespace.to_string(), name.to_string()))
            .cloned())
    }

    async fn create_lease(&self, lease: &Lease, owner: &NodeOwner) -> Result<Lease, ClusterError> {
        let mut inner = self.record(format!("create_lease {}/{}", lease.namespace, lease.name));
        if let Some(err) = inner.take_error("create_lease") {
            return Err(err);
        }
        let key = (lease.namespace.clone(), lease.name.clone());
        if !inner.namespaces.contains(&lease.namespace) {
            return Err(ClusterError::NotFound(format!(
                "namespace {}",
                lease.namespace
            )));
        }
        if inner.leases.contains_key(&key) {
            return Err(ClusterError::AlreadyExists(lease.name.clone()));
        }
        let created = Lease {
            resource_version: inner.next_version(),
            ..lease.clone()
        };
        inner.leases.insert(key.clone(), created.clone());
        inner.lease_owners.insert(key, owner.clone());
        Ok(created)
    }

    async fn update_lease(&self, lease: &Lease) -> Result<Lease, ClusterError> {
        let mut inner = self.record(format!("update_lease {}/{}", lease.namespace, lease.name));
        if let Some(err) = inner.take_error("update_lease") {
            return Err(err);
        }
        let key = (lease.namespace.clone(), lease.name.clone());
        let version = inner.next_version();
        let current = inner
            .leases
            .get_mut(&key)
            .ok_or_else(|| ClusterError::NotFound(lease.name.clone()))?;
        if current.resource_version != lease.resource_version {
            return Err(ClusterError::Conflict(lease.name.clone()));
        }
        *current = Lease {
            resource_version: version,
            ..lease.clone()
        };
        Ok(current.clone())
    }

    async fn delete_lease(&self, lease: &Lease) -> Result<(), ClusterError> {
        let mut inner = self.record(format!("delete_lease {}/{}", lease.namespace, lease.name));
        if let Some(err) = inner.take_error("delete_lease") {
            return Err(err);
        }
        let key = (lease.namespace.clone(), lease.name.clone());
        let current = inner
            .leases
            .get(&key)
            .ok_or_else(|| ClusterError::NotFound(lease.name.clone()))?;
        if current.resource_version != lease.resource_version {
            return Err(ClusterError::Conflict(lease.name.clone()));
        }
        inner.leases.remove(&key);
        Ok(())
    }

    async fn list_pods(&self, node: &str) -> Result<Vec<PodInfo>, ClusterError> {
        let mut inner = self.record(format!("list_pods {node}"));
        if let Some(err) = inner.take_error("list_pods") {
            return Err(err);
        }
        Ok(inner.pods.get(node).cloned().unwrap_or_default())
    }

    fn watch_pods(&self, node: &str) -> BoxStream<'static, Vec<PodInfo>> {
        let mut inner = self.record(format!("watch_pods {node}"));
        let (tx, rx) = mpsc::unbounded_channel();
        inner.pod_watchers.push((node.to_string(), tx));
        snapshots(inner.pods.get(node).cloned().unwrap_or_default(), rx)
    }

    async fn daemonset_exists(&self, namespace: &str, name: &str) -> Result<bool, ClusterError> {
        let mut inner = self.record(format!("daemonset_exists {namespace}/{name}"));
        if let Some(err) = inner.take_error("daemonset_exists") {
            return Err(err);
        }
        Ok(inner
            .daemonsets
            .contains(&(namespace.to_string(), name.to_string())))
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        _grace_period_seconds: Option<i64>,
    ) -> Result<(), ClusterError> {
        let mut inner = self.record(format!("delete_pod {namespace}/{name}"));
        if let Some(err) = inner.take_error("delete_pod") {
            return Err(err);
        }
        if inner.remove_pod(namespace, name) {
            Ok(())
        } else {
            Err(ClusterError::NotFound(format!("{namespace}/{name}")))
        }
    }

    async fn evict_pod(
        &self,
        namespace: &str,
        name: &str,
        _grace_period_seconds: Option<i64>,
    ) -> Result<EvictionOutcome, ClusterError> {
        let mut inner = self.record(format!("evict_pod {namespace}/{name}"));
        if let Some(err) = inner.take_error("evict_pod") {
            return Err(err);
        }
        let pod = PodRef {
            namespace: namespace.to_string(),
            name: name.to_string(),
        };
        if let Some(outcome) = inner.evictions.get_mut(&pod).and_then(VecDeque::pop_front) {
            return Ok(outcome);
        }
        let Some((node, index)) = inner.find_pod(namespace, name) else {
            return Ok(EvictionOutcome::NotFound);
        };
        let mut pdbs: Vec<&mut Pdb> = inner
            .pdbs
            .iter_mut()
            .filter(|p| p.namespace == namespace && p.pods.contains(name))
            .collect();
        if pdbs.len() > 1 {
            return Ok(EvictionOutcome::TooManyPdbs {
                message: "This pod has more than one PodDisruptionBudget, which the eviction \
                          subresource does not support."
                    .to_string(),
            });
        }
        if let Some(pdb) = pdbs.pop() {
            if pdb.allowed == 0 {
                return Ok(EvictionOutcome::BlockedByPdb {
                    pdb: Some(pdb.name.clone()),
                    message: format!(
                        "The disruption budget {} needs {} healthy pods and has {} currently",
                        pdb.name,
                        pdb.pods.len(),
                        pdb.pods.len()
                    ),
                    retry_after: None::<Duration>,
                });
            }
            pdb.allowed -= 1;
        }
        if inner.evicted_pods_linger {
            if let Some(pods) = inner.pods.get_mut(&node)
                && let Some(p) = pods.get_mut(index)
            {
                p.terminating = true;
            }
            inner.notify_pods(&node);
        } else {
            inner.remove_pod(namespace, name);
        }
        Ok(EvictionOutcome::Evicted)
    }
}
