//! `impl Cluster for FakeCluster`: every call is recorded, a scripted error is returned first,
//! then the in-memory objects are read or changed the way the API server would.
//!
//! (Over 400 lines because it is one `impl Cluster` block, which Rust keeps in one file: one
//! short method per port call, each mirroring the kube adapter's.)

use std::collections::VecDeque;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt};
use tokio::sync::mpsc;

use super::cluster::FakeCluster;
use super::objects::UnwatchedPdb;
use crate::interception::EvictionWebhooks;
use crate::model::{
    EXCLUDE_LABEL, Event, FINALIZER, Lease, Maintenance, MaintenanceName, MaintenanceStatus,
    NodeName, NodeOwner, NodePatch, NodeState, NodeSummaryEvent, PodInfo, PodList, PodRef,
    RecordWrite, StatusPrecondition, Uid,
};
use crate::pdb::PdbPod;
use crate::pdb::{LabelSelector, PdbChange};
use crate::ports::{Cluster, ClusterError, EvictionOutcome};

fn snapshots<T: Send + 'static>(
    initial: T,
    rx: mpsc::UnboundedReceiver<T>,
) -> BoxStream<'static, T> {
    let rest = stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|v| (v, rx)) });
    stream::once(async move { initial }).chain(rest).boxed()
}

/// A pod list as the port hands it out (every pod a fresh allocation, as after a relist).
fn shared(pods: Vec<PodInfo>) -> PodList {
    pods.into_iter().map(Arc::new).collect()
}

#[async_trait]
impl Cluster for FakeCluster {
    async fn get_maintenance(
        &self,
        name: &MaintenanceName,
    ) -> Result<Option<Maintenance>, ClusterError> {
        let inner = self
            .enter_or_fail("get_maintenance", format!("get_maintenance {name}"))
            .await?;
        Ok(inner.maintenances.get(name).cloned())
    }

    async fn add_finalizer(
        &self,
        name: &MaintenanceName,
        _seen: &[String],
    ) -> Result<(), ClusterError> {
        let mut inner = self
            .enter_or_fail("add_finalizer", format!("add_finalizer {name}"))
            .await?;
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

    async fn remove_finalizer(
        &self,
        name: &MaintenanceName,
        uid: &Uid,
        _seen: &[String],
    ) -> Result<(), ClusterError> {
        let mut inner = self
            .enter_or_fail("remove_finalizer", format!("remove_finalizer {name}"))
            .await?;
        let Some(nm) = inner.maintenances.get_mut(name).filter(|nm| nm.uid == *uid) else {
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
        name: &MaintenanceName,
        uid: &Uid,
        seen: StatusPrecondition,
        status: &MaintenanceStatus,
    ) -> Result<(), ClusterError> {
        let mut inner = self
            .enter_or_fail("write_status", format!("write_status {name}"))
            .await?;
        let nm = inner
            .maintenances
            .get_mut(name)
            .ok_or_else(|| ClusterError::NotFound(name.to_string()))?;
        // The kube adapter's `test` ops: the object's uid, and the status as last seen.
        if nm.uid != *uid || StatusPrecondition::over(nm.status.as_ref()) != seen {
            return Err(ClusterError::Conflict(format!(
                "status of nodemaintenance {name} changed since it was read"
            )));
        }
        nm.status = Some(MaintenanceStatus {
            revision: Some(seen.next_revision()),
            ..status.clone()
        });
        inner.touch_nm(name);
        Ok(())
    }

    async fn emit_event(&self, event: &Event) -> Result<(), ClusterError> {
        let mut inner = self
            .enter_or_fail("emit_event", format!("emit_event {}", event.reason))
            .await?;
        inner.events.push(event.clone());
        Ok(())
    }

    async fn get_node(&self, name: &NodeName) -> Result<Option<NodeState>, ClusterError> {
        let inner = self
            .enter_or_fail("get_node", format!("get_node {name}"))
            .await?;
        Ok(inner.nodes.get(name).cloned())
    }

    async fn patch_node(&self, patch: &NodePatch) -> Result<NodeState, ClusterError> {
        let mut inner = self
            .enter_or_fail("patch_node", format!("patch_node {}", patch.node))
            .await?;
        let version = inner.next_version();
        let node = inner
            .nodes
            .get_mut(&patch.node)
            .ok_or_else(|| ClusterError::NotFound(patch.node.to_string()))?;
        let stale =
            !patch.expected_version.is_empty() && node.resource_version != patch.expected_version;
        if node.taints != patch.expected_taints || stale {
            return Err(ClusterError::Conflict(format!(
                "test of /spec/taints or /metadata/resourceVersion failed on node {}",
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
        match &patch.record {
            RecordWrite::Keep => {}
            RecordWrite::Set { record, annotated } => {
                if !annotated && node.annotated {
                    return Err(ClusterError::Conflict(format!(
                        "test of /metadata/annotations failed on node {}",
                        patch.node
                    )));
                }
                node.record = Some(record.clone());
                node.unreadable_record = false;
                node.annotated = true;
            }
            RecordWrite::Remove => {
                node.record = None;
                node.unreadable_record = false;
            }
        }
        node.resource_version = version;
        let node = node.clone();
        inner.notify_node(&patch.node);
        Ok(node)
    }

    fn watch_node(&self, name: &NodeName) -> BoxStream<'static, Option<NodeState>> {
        let mut inner = self.record(format!("watch_node {name}"));
        inner.maybe_panic("watch_node");
        let (tx, rx) = mpsc::unbounded_channel();
        inner.node_watchers.push((name.to_string(), tx));
        snapshots(inner.nodes.get(name).cloned(), rx)
    }

    fn watch_node_summaries(&self) -> BoxStream<'static, NodeSummaryEvent> {
        let mut inner = self.record("watch_node_summaries".to_string());
        let (tx, rx) = mpsc::unbounded_channel();
        inner.summary_watchers.push(tx);
        let names: Vec<NodeName> = inner.nodes.keys().cloned().collect();
        let listed = names.iter().filter_map(|n| inner.summary(n)).collect();
        snapshots(NodeSummaryEvent::Listed(listed), rx)
    }

    async fn ensure_namespace(&self, namespace: &str) -> Result<(), ClusterError> {
        let mut inner = self
            .enter_or_fail("ensure_namespace", format!("ensure_namespace {namespace}"))
            .await?;
        inner.namespaces.insert(namespace.to_string());
        Ok(())
    }

    async fn get_lease(&self, namespace: &str, name: &str) -> Result<Option<Lease>, ClusterError> {
        let inner = self
            .enter_or_fail("get_lease", format!("get_lease {namespace}/{name}"))
            .await?;
        Ok(inner
            .leases
            .get(&(namespace.to_string(), name.to_string()))
            .cloned())
    }

    async fn list_leases(&self, namespace: &str) -> Result<Vec<Lease>, ClusterError> {
        let inner = self
            .enter_or_fail("list_leases", format!("list_leases {namespace}"))
            .await?;
        Ok(inner
            .leases
            .iter()
            .filter(|((ns, _), _)| ns == namespace)
            .map(|(_, lease)| lease.clone())
            .collect())
    }

    fn watch_lease(&self, namespace: &str, name: &str) -> BoxStream<'static, Option<Lease>> {
        let mut inner = self.record(format!("watch_lease {namespace}/{name}"));
        let key = (namespace.to_string(), name.to_string());
        let (tx, rx) = mpsc::unbounded_channel();
        let current = inner.leases.get(&key).cloned();
        inner.lease_watchers.push((key, tx));
        snapshots(current, rx)
    }

    async fn create_lease(&self, lease: &Lease, owner: &NodeOwner) -> Result<Lease, ClusterError> {
        let mut inner = self
            .enter_or_fail(
                "create_lease",
                format!("create_lease {}/{}", lease.namespace, lease.name),
            )
            .await?;
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
        inner.lease_owners.insert(key.clone(), owner.clone());
        inner.notify_lease(&key);
        Ok(created)
    }

    async fn update_lease(&self, lease: &Lease) -> Result<Lease, ClusterError> {
        let mut inner = self
            .enter_or_fail(
                "update_lease",
                format!("update_lease {}/{}", lease.namespace, lease.name),
            )
            .await?;
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
        let updated = current.clone();
        inner.notify_lease(&key);
        Ok(updated)
    }

    async fn delete_lease(&self, lease: &Lease) -> Result<(), ClusterError> {
        let mut inner = self
            .enter_or_fail(
                "delete_lease",
                format!("delete_lease {}/{}", lease.namespace, lease.name),
            )
            .await?;
        let key = (lease.namespace.clone(), lease.name.clone());
        let current = inner
            .leases
            .get(&key)
            .ok_or_else(|| ClusterError::NotFound(lease.name.clone()))?;
        if current.resource_version != lease.resource_version {
            return Err(ClusterError::Conflict(lease.name.clone()));
        }
        inner.leases.remove(&key);
        inner.notify_lease(&key);
        Ok(())
    }

    async fn list_pods(&self, node: &NodeName) -> Result<PodList, ClusterError> {
        let inner = self
            .enter_or_fail("list_pods", format!("list_pods {node}"))
            .await?;
        Ok(shared(inner.pods.get(node).cloned().unwrap_or_default()))
    }

    fn watch_pods(&self, node: &NodeName) -> BoxStream<'static, PodList> {
        let mut inner = self.record(format!("watch_pods {node}"));
        inner.maybe_panic("watch_pods");
        let (tx, rx) = mpsc::unbounded_channel();
        inner.pod_watchers.push((node.to_string(), tx));
        let delivered = inner.delivered_pods.clone();
        snapshots(inner.pods.get(node).cloned().unwrap_or_default(), rx)
            .map(move |pods| {
                let list = shared(pods);
                delivered
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend(list.iter().map(Arc::downgrade));
                list
            })
            .boxed()
    }

    async fn daemonset_exists(
        &self,
        namespace: &str,
        name: &str,
        uid: &Uid,
    ) -> Result<bool, ClusterError> {
        let inner = self
            .enter_or_fail(
                "daemonset_exists",
                format!("daemonset_exists {namespace}/{name}"),
            )
            .await?;
        Ok(inner
            .daemonsets
            .get(&(namespace.to_string(), name.to_string()))
            .is_some_and(|stored| uid.is_empty() || stored == uid))
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &Uid,
        _grace_period_seconds: Option<i64>,
    ) -> Result<(), ClusterError> {
        let mut inner = self
            .enter_or_fail("delete_pod", format!("delete_pod {namespace}/{name}"))
            .await?;
        // The uid precondition: another pod of that name is not the one asked for.
        if inner
            .pod_uid(namespace, name)
            .is_some_and(|found| found != uid)
        {
            return Err(ClusterError::NotFound(format!(
                "{namespace}/{name} uid {uid}"
            )));
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
        uid: &Uid,
        _grace_period_seconds: Option<i64>,
    ) -> Result<EvictionOutcome, ClusterError> {
        // Over 80 lines: the fake Eviction API's checks in order (an injected error, the uid
        // precondition, a scripted outcome, the pod, the watched budgets, the unwatched ones,
        // then the eviction itself); the order is the behaviour being faked.
        let mut inner = self
            .enter_or_fail("evict_pod", format!("evict_pod {namespace}/{name}"))
            .await?;
        if inner
            .pod_uid(namespace, name)
            .is_some_and(|found| found != uid)
        {
            // The uid precondition failed (a 409 the adapter reads as gone). Recorded apart:
            // a test can tell that a request reached a pod that took the name.
            inner
                .calls
                .push(format!("uid_precondition_failed {namespace}/{name}"));
            return Ok(EvictionOutcome::NotFound);
        }
        let pod = PodRef {
            namespace: namespace.into(),
            name: name.into(),
        };
        if let Some(outcome) = inner.evictions.get_mut(&pod).and_then(VecDeque::pop_front) {
            return Ok(outcome);
        }
        let Some((node, index)) = inner.find_pod(namespace, name) else {
            return Ok(EvictionOutcome::NotFound);
        };
        let labels = inner
            .pods
            .get(&node)
            .and_then(|pods| pods.get(index))
            .map(|p| p.labels.clone())
            .unwrap_or_default();
        let selecting: Vec<String> = inner
            .watched_pdbs
            .values()
            .filter(|b| b.selects(namespace, &labels))
            .map(|b| b.key())
            .collect();
        if selecting.len() > 1 {
            return Ok(EvictionOutcome::TooManyPdbs {
                message: "This pod has more than one PodDisruptionBudget, which the eviction \
                          subresource does not support."
                    .to_string(),
            });
        }
        if let Some(key) = selecting.first()
            && let Some(mut pdb) = inner.watched_pdbs.get(key).cloned()
        {
            let fresh = pdb.fresh_status().is_some();
            let message = pdb.refusal_message();
            match pdb.status.as_mut() {
                Some(status) if fresh && status.disruptions_allowed > 0 => {
                    status.disruptions_allowed -= 1;
                    status.disrupted_pods.insert(name.to_string());
                    inner.store_watched_pdb(pdb);
                }
                _ => {
                    return Ok(EvictionOutcome::BlockedByPdb {
                        pdb: Some(pdb.name.clone()),
                        message,
                        retry_after: None,
                    });
                }
            }
        }
        let mut pdbs: Vec<&mut UnwatchedPdb> = inner
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

    fn watch_pdbs(&self) -> BoxStream<'static, PdbChange> {
        let mut inner = self.record("watch_budgets".to_string());
        let (tx, rx) = mpsc::unbounded_channel();
        inner.pdb_watchers.push(tx);
        let listed = PdbChange::Listed(inner.watched_pdbs.values().cloned().collect());
        snapshots(listed, rx)
    }

    fn watch_vms(&self, node: &NodeName) -> BoxStream<'static, crate::model::VmList> {
        let mut inner = self.record(format!("watch_vms {node}"));
        let (tx, rx) = mpsc::unbounded_channel();
        inner.vm_watchers.push((node.to_string(), tx));
        let vms = inner.vms_on(node);
        snapshots(vms, rx)
    }

    fn watch_eviction_webhooks(&self) -> BoxStream<'static, EvictionWebhooks> {
        let mut inner = self.record("watch_eviction_webhooks".to_string());
        let (tx, rx) = mpsc::unbounded_channel();
        inner.webhook_watchers.push(tx);
        snapshots(inner.eviction_webhooks.clone(), rx)
    }

    async fn list_selected_pods(
        &self,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Result<Vec<PdbPod>, ClusterError> {
        let inner = self.record_or_fail(
            "list_selected_pods",
            format!("list_selected_pods {namespace}"),
        )?;
        let mut pods: Vec<PdbPod> = inner
            .pods
            .iter()
            .flat_map(|(node, pods)| pods.iter().map(move |p| (node, p)))
            .filter(|(_, p)| &*p.namespace == namespace && selector.matches(&p.labels))
            .map(|(node, p)| PdbPod {
                namespace: p.namespace.to_string(),
                name: p.name.to_string(),
                controller: p.controller.clone(),
                phase: p.phase,
                ready: p.ready,
                terminating: p.terminating,
                node_name: Some(node.to_string()),
                unschedulable: None,
                node_selector: std::collections::BTreeMap::new(),
                tolerations: Vec::new(),
            })
            .collect();
        pods.extend(
            inner
                .unplaced
                .iter()
                .filter(|p| p.namespace == namespace)
                .cloned(),
        );
        Ok(pods)
    }

    async fn list_maintained_nodes(&self) -> Result<Vec<NodeState>, ClusterError> {
        let inner =
            self.record_or_fail("list_maintained_nodes", "list_maintained_nodes".to_string())?;
        Ok(inner
            .nodes
            .values()
            .filter(|n| n.labels.contains_key(EXCLUDE_LABEL))
            .cloned()
            .collect())
    }

    async fn list_maintenances(&self) -> Result<Vec<Maintenance>, ClusterError> {
        let inner = self.record_or_fail("list_maintenances", "list_maintenances".to_string())?;
        Ok(inner.maintenances.values().cloned().collect())
    }
}
