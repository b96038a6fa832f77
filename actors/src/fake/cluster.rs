//! The in-memory cluster: its setup and what tests read back (its objects are in `objects`).

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

use crate::model::{
    Event, Lease, Maintenance, MaintenanceStatus, NodeOwner, NodeState, PodInfo, PodRef,
};
use crate::pdb::PdbPod;
use crate::pdb::{Pdb, PdbStatus};
use crate::ports::{ClusterError, EvictionOutcome};

pub use super::objects::MaintenanceChange;
use super::objects::{Inner, UnwatchedPdb};

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

    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panicking test thread may poison the lock; the data is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn record(&self, call: String) -> MutexGuard<'_, Inner> {
        let mut inner = self.lock();
        inner.calls.push(call);
        inner
    }

    /// Records a call of `op`, waits as long as a scripted stall says (forever: the call
    /// hangs, as on a half-open connection), then locks the state for the call's work.
    pub(super) async fn enter(&self, op: &str, call: String) -> MutexGuard<'_, Inner> {
        let stall = {
            let mut inner = self.record(call);
            inner.stalls.get_mut(op).and_then(VecDeque::pop_front)
        };
        match stall {
            Some(Some(delay)) => tokio::time::sleep(delay).await,
            Some(None) => std::future::pending::<()>().await,
            None => {}
        }
        self.lock()
    }

    /// [`FakeCluster::enter`], then the error scripted for the next call of `op`, if any: the
    /// start of every call that can fail.
    pub(super) async fn enter_or_fail(
        &self,
        op: &str,
        call: String,
    ) -> Result<MutexGuard<'_, Inner>, ClusterError> {
        let mut inner = self.enter(op, call).await;
        match inner.take_error(op) {
            Some(err) => Err(err),
            None => Ok(inner),
        }
    }

    /// [`FakeCluster::record`], then the error scripted for the next call of `op`, if any (for
    /// the calls that never stall).
    pub(super) fn record_or_fail(
        &self,
        op: &str,
        call: String,
    ) -> Result<MutexGuard<'_, Inner>, ClusterError> {
        let mut inner = self.record(call);
        match inner.take_error(op) {
            Some(err) => Err(err),
            None => Ok(inner),
        }
    }

    // --- setup --------------------------------------------------------------------------------

    /// Adds or replaces a node (see [`NodeState::test`]).
    pub fn add_node(&self, name: &str) {
        self.set_node(NodeState::test(name));
    }

    /// Adds or replaces a KubeVirt VMI (by namespace and name).
    pub fn put_vm(&self, vm: crate::model::VmInfo) {
        let mut inner = self.lock();
        inner
            .vms
            .retain(|v| !(v.namespace == vm.namespace && v.name == vm.name));
        inner.vms.push(vm);
        inner.notify_vms();
    }

    /// Registers admission webhooks on `pods/eviction` by name (none: nothing intercepts).
    pub fn set_eviction_webhooks(&self, names: &[&str]) {
        let mut inner = self.lock();
        inner.eviction_webhooks = crate::interception::EvictionWebhooks {
            names: names.iter().map(|n| n.to_string()).collect(),
        };
        inner.notify_webhooks();
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

    /// Sets a node's `Ready` condition (nodes are Ready unless told otherwise): not ready is
    /// `Unknown` (`NodeStatusUnknown`, the node controller's word for a kubelet gone silent).
    pub fn set_node_ready(&self, name: &str, ready: bool) {
        let readiness = if ready {
            crate::model::NodeReady::ready()
        } else {
            crate::model::NodeReady {
                status: Some(crate::model::ConditionStatus::Unknown),
                since: None,
                reason: Some("NodeStatusUnknown".to_string()),
            }
        };
        self.set_node_readiness(name, readiness);
    }

    /// Sets a node's `Ready` condition as given.
    pub fn set_node_readiness(&self, name: &str, readiness: crate::model::NodeReady) {
        let mut inner = self.lock();
        if readiness.status == Some(crate::model::ConditionStatus::True) {
            inner.not_ready.remove(name);
        } else {
            inner.not_ready.insert(name.to_string());
        }
        if let Some(node) = inner.nodes.get_mut(name) {
            node.ready = readiness;
        }
        inner.notify_node(name);
    }

    /// Removes a node.
    pub fn remove_node(&self, name: &str) {
        let mut inner = self.lock();
        inner.nodes.remove(name);
        inner.notify_node(name);
    }

    /// A node's state.
    pub fn node(&self, name: &str) -> Option<NodeState> {
        self.lock().nodes.get(name).cloned()
    }

    /// Adds a running pod on a node, controlled by a ReplicaSet (see [`PodInfo::test`]).
    pub fn add_pod(&self, node: &str, namespace: &str, name: &str) {
        self.add_pod_info(node, PodInfo::test(namespace, name));
    }

    /// Adds a pod on a node.
    pub fn add_pod_info(&self, node: &str, pod: PodInfo) {
        let mut inner = self.lock();
        inner.pods.entry(node.into()).or_default().push(pod);
        inner.notify_pods(node);
    }

    /// The pods handed out by the pod watches whose handed-out version something still holds,
    /// as `namespace/name`, once each.
    pub fn held_watched_pods(&self) -> BTreeSet<String> {
        let delivered = self.lock().delivered_pods.clone();
        let delivered = delivered.lock().unwrap_or_else(PoisonError::into_inner);
        delivered
            .iter()
            .filter_map(Weak::upgrade)
            .map(|pod| format!("{}/{}", pod.namespace, pod.name))
            .collect()
    }

    /// Removes a pod (as if its controller or kubelet removed it).
    pub fn remove_pod(&self, namespace: &str, name: &str) -> bool {
        self.lock().remove_pod(namespace, name)
    }

    /// Pods on a node.
    pub fn pods(&self, node: &str) -> Vec<PodInfo> {
        self.lock().pods.get(node).cloned().unwrap_or_default()
    }

    /// Declares a DaemonSet as existing, with the uid its pods name
    /// ([`PodInfo::controlled_by`]: `uid-<name>`).
    pub fn add_daemonset(&self, namespace: &str, name: &str) {
        self.add_daemonset_with_uid(namespace, name, &format!("uid-{name}"));
    }

    /// Declares a DaemonSet as existing with `uid` (one created again under the same name).
    pub fn add_daemonset_with_uid(&self, namespace: &str, name: &str, uid: &str) {
        self.lock()
            .daemonsets
            .insert((namespace.to_string(), name.to_string()), uid.into());
    }

    /// Deletes a DaemonSet (its pods are left, as with `--cascade=orphan`).
    pub fn remove_daemonset(&self, namespace: &str, name: &str) {
        self.lock()
            .daemonsets
            .remove(&(namespace.to_string(), name.to_string()));
    }

    /// Adds a PodDisruptionBudget covering `pods` (names in `namespace`) allowing `allowed`
    /// disruptions; each eviction consumes one.
    pub fn add_pdb(&self, namespace: &str, name: &str, pods: &[&str], allowed: u32) {
        self.lock().pdbs.push(UnwatchedPdb {
            name: name.to_string(),
            namespace: namespace.to_string(),
            pods: pods.iter().map(|p| p.to_string()).collect(),
            allowed,
        });
    }

    /// Adds or replaces a watched PodDisruptionBudget (the PDB watch reports it); the fake's
    /// Eviction API checks it like the real one: evicting a pod it selects takes one off
    /// `disruptionsAllowed` and records the pod in `disruptedPods`, a stale status refuses.
    pub fn put_watched_pdb(&self, pdb: Pdb) {
        self.lock().store_watched_pdb(pdb);
    }

    /// Plays the disruption controller: PDB `namespace/name` allows `allowed` disruptions
    /// now (a fresh status; the evictions it recorded are seen through).
    pub fn set_watched_pdb_allowed(&self, namespace: &str, name: &str, allowed: i32) {
        let mut inner = self.lock();
        let Some(mut pdb) = inner
            .watched_pdbs
            .get(&format!("{namespace}/{name}"))
            .cloned()
        else {
            return;
        };
        let status = pdb.status.get_or_insert_with(PdbStatus::default);
        status.observed_generation = pdb.generation;
        status.disruptions_allowed = allowed;
        status.disrupted_pods.clear();
        inner.store_watched_pdb(pdb);
    }

    /// A watched PDB as the fake has it now.
    pub fn pdb(&self, namespace: &str, name: &str) -> Option<Pdb> {
        self.lock()
            .watched_pdbs
            .get(&format!("{namespace}/{name}"))
            .cloned()
    }

    /// Adds a pod that is on no node (a replacement the scheduler could not place, say).
    pub fn add_unplaced_pod(&self, pod: PdbPod) {
        self.lock().unplaced.push(pod);
    }

    /// Sets how many disruptions a PDB allows now.
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
                namespace: namespace.into(),
                name: name.into(),
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

    /// Forgets every scripted error, stall and panic (e.g. the API server recovered).
    pub fn clear_scripts(&self) {
        let mut inner = self.lock();
        inner.errors.clear();
        inner.stalls.clear();
        inner.panics.clear();
    }

    /// Makes the next `times` calls of `op` hang forever (a half-open connection).
    pub fn hang_next(&self, op: &str, times: usize) {
        self.lock()
            .stalls
            .entry(op.to_string())
            .or_default()
            .extend(std::iter::repeat_n(None, times));
    }

    /// Makes the next `times` calls of `op` take `delay` before they are served.
    pub fn delay_next(&self, op: &str, times: usize, delay: Duration) {
        self.lock()
            .stalls
            .entry(op.to_string())
            .or_default()
            .extend(std::iter::repeat_n(Some(delay), times));
    }

    /// Makes the next `times` calls of `op` panic (watches: when they are opened).
    pub fn panic_next(&self, op: &str, times: usize) {
        *self.lock().panics.entry(op.to_string()).or_default() += times;
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
        let key = (lease.namespace.clone(), lease.name.clone());
        inner.leases.insert(
            key.clone(),
            Lease {
                resource_version: version,
                ..lease
            },
        );
        inner.notify_lease(&key);
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
        self.create(Maintenance::test(name).on(node).created_at(created))
    }

    /// Creates a NodeMaintenance as given (its resourceVersion assigned), as `kubectl create`
    /// would; returns it as stored.
    pub fn create(&self, nm: Maintenance) -> Maintenance {
        let mut inner = self.lock();
        let version = inner.next_version();
        let nm = Maintenance {
            resource_version: version,
            ..nm
        };
        inner.maintenances.insert(nm.name.clone(), nm.clone());
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
        let _ = tx.send(MaintenanceChange::Listed);
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

    /// Ends the PDB watches and the watches of eviction webhooks open now (as a real API
    /// server's watch ends): their subscribers see their streams end.
    pub fn end_eviction_watches(&self) {
        let mut inner = self.lock();
        inner.pdb_watchers.clear();
        inner.webhook_watchers.clear();
    }

    /// Ends the pod watches open now (as a real API server's watch ends): their subscribers see
    /// their streams end.
    pub fn end_pod_watches(&self) {
        self.lock().pod_watchers.clear();
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
