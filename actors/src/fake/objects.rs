//! The in-memory cluster's objects, their watchers and the scripts tests set up, with the
//! changes that keep them consistent (as the API server and its controllers would).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::interception::EvictionWebhooks;
use crate::model::{
    Event, Lease, Maintenance, MaintenanceName, NodeName, NodeOwner, NodeState, NodeSummary,
    NodeSummaryEvent, PodInfo, PodRef, Uid,
};
use crate::pdb::PdbPod;
use crate::pdb::{Pdb, PdbChange};
use crate::ports::{ClusterError, EvictionOutcome};

/// A lease's namespace and name.
pub(super) type LeaseKey = (String, String);

/// A change of a NodeMaintenance, as the controller's watch reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MaintenanceChange {
    /// Created or changed.
    Upsert(Box<Maintenance>),
    /// Every NodeMaintenance that existed when the subscription began has been sent (the
    /// controller's watch says so after each listing: the orphan sweep runs then).
    Listed,
    /// Gone.
    Deleted {
        /// Its name.
        name: MaintenanceName,
        /// Its uid.
        uid: Uid,
    },
}

/// A PodDisruptionBudget simulation: refuses evictions of its pods while `allowed` is 0.
#[derive(Debug, Clone)]
pub(super) struct UnwatchedPdb {
    pub(super) name: String,
    pub(super) namespace: String,
    pub(super) pods: HashSet<String>,
    pub(super) allowed: u32,
}

/// The pods the pod watches handed out (see [`Inner::delivered_pods`]).
pub(super) type DeliveredPods = Arc<Mutex<Vec<Weak<PodInfo>>>>;

#[derive(Default)]
pub(super) struct Inner {
    pub(super) nodes: BTreeMap<NodeName, NodeState>,
    /// Pods by node name.
    pub(super) pods: BTreeMap<NodeName, Vec<PodInfo>>,
    pub(super) leases: BTreeMap<(String, String), Lease>,
    pub(super) lease_owners: BTreeMap<(String, String), NodeOwner>,
    pub(super) namespaces: HashSet<String>,
    pub(super) maintenances: BTreeMap<MaintenanceName, Maintenance>,
    /// DaemonSets by `(namespace, name)`, with their uid.
    pub(super) daemonsets: HashMap<(String, String), Uid>,
    pub(super) events: Vec<Event>,
    pub(super) calls: Vec<String>,
    pub(super) errors: HashMap<String, VecDeque<ClusterError>>,
    /// Per operation: how long its next calls take before they are served (None: forever).
    pub(super) stalls: HashMap<String, VecDeque<Option<Duration>>>,
    /// Per operation: how many of its next calls panic (a bug in an adapter, say).
    pub(super) panics: HashMap<String, usize>,
    pub(super) evictions: HashMap<PodRef, VecDeque<EvictionOutcome>>,
    pub(super) pdbs: Vec<UnwatchedPdb>,
    /// Evicted pods are removed at once unless this is set (then they only become terminating).
    pub(super) evicted_pods_linger: bool,
    pub(super) version: u64,
    pub(super) node_watchers: Vec<(String, mpsc::UnboundedSender<Option<NodeState>>)>,
    /// Followers of one lease, by (namespace, name).
    pub(super) lease_watchers: Vec<(LeaseKey, mpsc::UnboundedSender<Option<Lease>>)>,
    pub(super) pod_watchers: Vec<(String, mpsc::UnboundedSender<Vec<PodInfo>>)>,
    /// Every pod the pod watches handed out, as it was handed out (a weak reference: whether
    /// nmo still holds that version).
    pub(super) delivered_pods: DeliveredPods,
    pub(super) nm_watchers: Vec<mpsc::UnboundedSender<MaintenanceChange>>,
    /// Watched PodDisruptionBudgets (the domain view), by `<namespace>/<name>`.
    pub(super) watched_pdbs: BTreeMap<String, Pdb>,
    pub(super) pdb_watchers: Vec<mpsc::UnboundedSender<PdbChange>>,
    /// Pods on no node (e.g. replacements the scheduler cannot place).
    pub(super) unplaced: Vec<PdbPod>,
    /// Nodes whose `Ready` condition is not True.
    pub(super) not_ready: HashSet<String>,
    pub(super) summary_watchers: Vec<mpsc::UnboundedSender<NodeSummaryEvent>>,
    /// The admission webhooks on `pods/eviction`.
    pub(super) eviction_webhooks: EvictionWebhooks,
    pub(super) webhook_watchers: Vec<mpsc::UnboundedSender<EvictionWebhooks>>,
    /// KubeVirt VMIs (none: KubeVirt is not installed).
    pub(super) vms: Vec<crate::model::VmInfo>,
    pub(super) vm_watchers: Vec<(String, mpsc::UnboundedSender<crate::model::VmList>)>,
}

impl Inner {
    pub(super) fn next_version(&mut self) -> String {
        self.version += 1;
        self.version.to_string()
    }

    pub(super) fn take_error(&mut self, op: &str) -> Option<ClusterError> {
        self.errors.get_mut(op).and_then(VecDeque::pop_front)
    }

    /// Panics if a panic is scripted for the next call of `op`.
    pub(super) fn maybe_panic(&mut self, op: &str) {
        if let Some(left) = self.panics.get_mut(op)
            && *left > 0
        {
            *left -= 1;
            panic!("scripted panic in {op}");
        }
    }

    pub(super) fn notify_node(&mut self, name: &str) {
        let snapshot = self.nodes.get(name).cloned();
        self.node_watchers
            .retain(|(n, tx)| n != name || tx.send(snapshot.clone()).is_ok());
        let event = match self.summary(name) {
            Some(summary) => NodeSummaryEvent::Changed(summary),
            None => NodeSummaryEvent::Deleted(name.into()),
        };
        self.summary_watchers
            .retain(|tx| tx.send(event.clone()).is_ok());
    }

    /// Tells the followers of the lease `key` how it is now.
    pub(super) fn notify_lease(&mut self, key: &LeaseKey) {
        let snapshot = self.leases.get(key).cloned();
        self.lease_watchers
            .retain(|(k, tx)| k != key || tx.send(snapshot.clone()).is_ok());
    }

    pub(super) fn summary(&self, name: &str) -> Option<NodeSummary> {
        self.nodes.get(name).map(|node| NodeSummary {
            name: name.into(),
            ready: !self.not_ready.contains(name),
            unschedulable: node.unschedulable,
        })
    }

    pub(super) fn notify_pods(&mut self, node: &str) {
        let snapshot = self.pods.get(node).cloned().unwrap_or_default();
        self.pod_watchers
            .retain(|(n, tx)| n != node || tx.send(snapshot.clone()).is_ok());
    }

    pub(super) fn notify_nm(&mut self, change: MaintenanceChange) {
        self.nm_watchers
            .retain(|tx| tx.send(change.clone()).is_ok());
    }

    pub(super) fn touch_nm(&mut self, name: &str) {
        let version = self.next_version();
        let Some(nm) = self.maintenances.get_mut(name) else {
            return;
        };
        nm.resource_version = version;
        if nm.deleting && nm.finalizers.is_empty() {
            let uid = nm.uid.clone();
            self.maintenances.remove(name);
            self.notify_nm(MaintenanceChange::Deleted {
                name: name.into(),
                uid,
            });
        } else {
            let nm = nm.clone();
            self.notify_nm(MaintenanceChange::Upsert(Box::new(nm)));
        }
    }

    /// The VMIs on `node`.
    pub(super) fn vms_on(&self, node: &str) -> crate::model::VmList {
        self.vms
            .iter()
            .filter(|vm| vm.node.as_deref() == Some(node))
            .cloned()
            .collect()
    }

    pub(super) fn notify_vms(&mut self) {
        let lists: Vec<(String, crate::model::VmList)> = self
            .vm_watchers
            .iter()
            .map(|(node, _)| (node.clone(), self.vms_on(node)))
            .collect();
        let mut lists = lists.into_iter();
        self.vm_watchers
            .retain(|(_, tx)| lists.next().is_some_and(|(_, list)| tx.send(list).is_ok()));
    }

    pub(super) fn notify_webhooks(&mut self) {
        let webhooks = self.eviction_webhooks.clone();
        self.webhook_watchers
            .retain(|tx| tx.send(webhooks.clone()).is_ok());
    }

    pub(super) fn notify_pdbs(&mut self, change: &PdbChange) {
        self.pdb_watchers
            .retain(|tx| tx.send(change.clone()).is_ok());
    }

    /// Stores `pdb` and tells the PDB watchers.
    pub(super) fn store_watched_pdb(&mut self, pdb: Pdb) {
        self.watched_pdbs.insert(pdb.key(), pdb.clone());
        self.notify_pdbs(&PdbChange::Applied(pdb));
    }

    pub(super) fn find_pod(&self, namespace: &str, name: &str) -> Option<(NodeName, usize)> {
        self.pods.iter().find_map(|(node, pods)| {
            pods.iter()
                .position(|p| &*p.namespace == namespace && &*p.name == name)
                .map(|i| (node.clone(), i))
        })
    }

    /// The uid of the pod `namespace/name`, on whichever node it is.
    pub(super) fn pod_uid(&self, namespace: &str, name: &str) -> Option<&str> {
        let (node, index) = self.find_pod(namespace, name)?;
        self.pods.get(&node)?.get(index).map(|p| p.uid.as_str())
    }

    pub(super) fn remove_pod(&mut self, namespace: &str, name: &str) -> bool {
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
