//! The actors' [`Cluster`] port implemented with kube-rs: the only place where the maintenance
//! logic meets the Kubernetes API.
//!
//! Every write first asks the leader election's [`Fence`] and is cut off at the fence's
//! deadline: a replica that is not (or no longer surely) the leader sends nothing, and a write
//! it sent as the leader cannot still be waiting for its answer once its leadership could have
//! passed to another replica. (A request the API server received before that moment may still
//! be processed late; the margin between the renew deadline and the lease duration, 5 s by
//! default, is what covers it, as in client-go.) Every call also has a deadline of its own:
//! the actors bound each port call (`nmo_actors::call_deadline`), and the shared DaemonSet lookup
//! is bounded here, inside the cache every caller waits on.

pub(crate) mod convert;
mod daemonsets;
mod errors;
pub(crate) mod event_writer;
mod eviction_request;
pub(crate) mod eviction_webhooks;
mod followed;
pub(crate) mod lease_hub;
pub mod node_hub;
mod node_patch;
pub(crate) mod pdbs;
mod shared_labels;
pub(crate) mod slim_node;
mod slim_pod;
mod status_patch;
pub(crate) mod vms;
pub mod watch;
pub mod watch_health;
pub mod watch_retry;
pub(crate) mod watch_session;

pub use convert::maintenance;

use async_trait::async_trait;
use futures::stream::BoxStream;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease as KubeLease;
use k8s_openapi::api::core::v1::{Namespace, Node, ObjectReference, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::watcher;
use kube::{Api, Client};
use nmo_actors::interception::EvictionWebhooks;
use nmo_actors::model::{
    Event, EventTarget, EventType, Lease, Maintenance, MaintenanceName, MaintenanceStatus,
    NodeName, NodeOwner, NodePatch, NodeState, NodeSummaryEvent, PodList, StatusPrecondition, Uid,
    VmList,
};
use nmo_actors::pdb::PdbPod;
use nmo_actors::pdb::{LabelSelector, PdbChange};
use nmo_actors::ports::{Cluster, ClusterError, EvictionOutcome};
use serde_json::json;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::crd::{FINALIZER, NodeMaintenance};
use crate::leader::Fence;
use errors::{eviction_outcome, to_cluster_error};
use slim_pod::SlimPod;

/// The component nmo's events are reported by: the Go operator's (its EventRecorder is
/// `mgr.GetEventRecorderFor("NodeMaintenance")`), so event filters and dashboards written for
/// it (`reportingComponent=NodeMaintenance`) keep matching.
pub const CONTROLLER_NAME: &str = "NodeMaintenance";

/// `deleteOptions.preconditions` naming exactly the pod with `uid`: a pod deleted and created
/// again with its name (a StatefulSet's, say, now on another node) is not touched.
fn uid_precondition(uid: &str) -> Preconditions {
    Preconditions {
        uid: Some(uid.to_string()),
        resource_version: None,
    }
}

/// [`Cluster`] over a kube client.
#[derive(Clone)]
pub struct KubeCluster {
    client: Client,
    events: event_writer::EventWriter,
    daemonsets: daemonsets::DaemonSetCache,
    initial_lists: watch::InitialLists,
    /// Every watch of this client, for the readiness probe.
    health: watch_health::WatchHealth,
    /// The one watch of every Node (see [`node_hub`]), shared by every clone.
    nodes: Arc<node_hub::NodeHub>,
    /// The one watch of each lease namespace (see [`lease_hub`]), shared by every clone.
    leases: Arc<std::sync::Mutex<std::collections::HashMap<String, Arc<lease_hub::LeaseHub>>>>,
    fence: Fence,
    call_timeout: Duration,
    /// Whether KubeVirt's VMIs are served, found out once for every node's watch.
    kubevirt: vms::KubeVirtApi,
}

impl KubeCluster {
    /// Wraps `client`; events are reported by `nmo`, instance `instance` (the pod name, say).
    /// Writes are always allowed (no leader election) until [`KubeCluster::with_fence`].
    pub fn new(client: Client, instance: Option<String>) -> Self {
        let events = event_writer::EventWriter::new(client.clone(), CONTROLLER_NAME, instance);
        let initial_lists = watch::InitialLists::default();
        let health = watch_health::WatchHealth::default();
        KubeCluster {
            nodes: Arc::new(node_hub::NodeHub::new(
                client.clone(),
                initial_lists.clone(),
                health.clone(),
            )),
            leases: Arc::default(),
            client,
            events,
            daemonsets: daemonsets::DaemonSetCache::default(),
            initial_lists,
            health,
            fence: Fence::open(),
            call_timeout: nmo_actors::config::defaults::CALL_TIMEOUT,
            kubevirt: vms::KubeVirtApi::default(),
        }
    }

    /// Writes only while `fence` allows them (the leader election's), each cut off at the
    /// fence's deadline.
    #[must_use]
    pub fn with_fence(mut self, fence: Fence) -> Self {
        self.fence = fence;
        self
    }

    /// How this client's watches get their first lists (shared with the NodeMaintenance
    /// watch, which learns it before any maintenance opens a watch).
    pub fn initial_lists(&self) -> watch::InitialLists {
        self.initial_lists.clone()
    }

    /// What every watch of this client is doing (shared with the NodeMaintenance watch and
    /// read by the readiness probe).
    pub fn watch_health(&self) -> watch_health::WatchHealth {
        self.health.clone()
    }

    /// Calls of the adapter's own (the shared DaemonSet lookup) give up after `timeout`.
    #[must_use]
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Sends `call` (a write) only if this replica may write, and gives up on its answer at
    /// the fence's deadline.
    async fn write<T>(
        &self,
        what: &str,
        call: impl Future<Output = Result<T, ClusterError>>,
    ) -> Result<T, ClusterError> {
        let Some(deadline) = self.fence.deadline().filter(|_| self.fence.allows_writes()) else {
            return Err(ClusterError::NotLeader(format!(
                "{what} refused: this replica does not lead"
            )));
        };
        match tokio::time::timeout_at(deadline, call).await {
            Ok(result) => result,
            Err(_) => Err(ClusterError::NotLeader(format!(
                "{what} abandoned: leadership could have passed to another replica"
            ))),
        }
    }

    fn maintenances(&self) -> Api<NodeMaintenance> {
        Api::all(self.client.clone())
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }

    fn leases(&self, namespace: &str) -> Api<KubeLease> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Writes the finalizer list with a JSON patch that first tests the list it was computed
    /// from, so a concurrent change by someone else is a conflict, never a lost finalizer.
    ///
    /// With `uid`, only the object of that uid: one of the same name with another uid
    /// (deleted and created again) counts as gone.
    async fn set_finalizers(
        &self,
        name: &str,
        uid: Option<&str>,
        change: impl Fn(&mut Vec<String>),
    ) -> Result<(), ClusterError> {
        let object = self
            .maintenances()
            .get_opt(name)
            .await
            .map_err(to_cluster_error)?
            .filter(|o| uid.is_none_or(|uid| o.metadata.uid.as_deref() == Some(uid)));
        let Some(object) = object else {
            return Err(ClusterError::NotFound(format!("nodemaintenance {name}")));
        };
        self.patch_finalizers(name, uid, object.metadata.finalizers.as_deref(), change)
            .await
    }

    /// The JSON patch of [`Self::set_finalizers`], computed from `current` (None: the object
    /// has no finalizer list), for the object with `uid` if given. A stale `current`, or
    /// another object of that name, fails a `test` op: `Conflict`.
    async fn patch_finalizers(
        &self,
        name: &str,
        uid: Option<&str>,
        current: Option<&[String]>,
        change: impl Fn(&mut Vec<String>),
    ) -> Result<(), ClusterError> {
        let list = current.map(<[String]>::to_vec).unwrap_or_default();
        let mut desired = list.clone();
        change(&mut desired);
        if desired == list {
            return Ok(());
        }
        let test = match current {
            Some(list) => json!(list),
            None => json!(null),
        };
        let mut ops = vec![
            json!({"op": "test", "path": "/metadata/finalizers", "value": test}),
            json!({"op": "add", "path": "/metadata/finalizers", "value": desired}),
        ];
        if let Some(uid) = uid {
            ops.insert(
                0,
                json!({"op": "test", "path": "/metadata/uid", "value": uid}),
            );
        }
        let patch: json_patch::Patch = serde_json::from_value(serde_json::Value::Array(ops))
            .map_err(|e| ClusterError::Other(e.to_string()))?;
        self.maintenances()
            .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
            .await
            .map(drop)
            .map_err(to_cluster_error)
    }
}

fn event_reference(target: &EventTarget) -> ObjectReference {
    match target {
        EventTarget::Maintenance { name, uid } => ObjectReference {
            api_version: Some("nodemaintenance.medik8s.io/v1beta1".into()),
            kind: Some("NodeMaintenance".into()),
            name: Some(name.to_string()),
            uid: Some(uid.to_string()),
            // No namespace: the object is cluster scoped (which is how `kubectl describe` looks
            // its events up); the event writer then files the event in `default`, like the Go
            // operator's.
            namespace: None,
            ..ObjectReference::default()
        },
        EventTarget::Node { name, uid } => ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(name.to_string()),
            uid: Some(uid.to_string()).filter(|u| !u.is_empty()),
            namespace: None,
            ..ObjectReference::default()
        },
    }
}

#[async_trait]
impl Cluster for KubeCluster {
    async fn get_maintenance(
        &self,
        name: &MaintenanceName,
    ) -> Result<Option<Maintenance>, ClusterError> {
        let object = self
            .maintenances()
            .get_opt(name)
            .await
            .map_err(to_cluster_error)?;
        Ok(object.as_ref().map(convert::maintenance))
    }

    async fn add_finalizer(
        &self,
        name: &MaintenanceName,
        seen: &[String],
    ) -> Result<(), ClusterError> {
        let add = |list: &mut Vec<String>| {
            if !list.iter().any(|f| f == FINALIZER) {
                list.push(FINALIZER.to_string());
            }
        };
        // Tried against the list as last seen first (no GET); if that is stale the `test` op
        // fails and the list is read afresh. An empty list is tested as absent, the usual
        // shape of a new object.
        let seen = (!seen.is_empty()).then_some(seen);
        self.write("add finalizer", async {
            match self.patch_finalizers(name, None, seen, add).await {
                Err(ClusterError::Conflict(_)) => self.set_finalizers(name, None, add).await,
                other => other,
            }
        })
        .await
    }

    async fn remove_finalizer(
        &self,
        name: &MaintenanceName,
        uid: &Uid,
        seen: &[String],
    ) -> Result<(), ClusterError> {
        let remove = |list: &mut Vec<String>| list.retain(|f| f != FINALIZER);
        // Tried against the list as last seen first (no GET), when it has our finalizer (one
        // without it would be no change, not a removal); the patch tests the uid and the list,
        // so a stale list or a new object of that name is read afresh.
        let seen = seen.iter().any(|f| f == FINALIZER).then_some(seen);
        self.write("remove finalizer", async {
            let first = match seen {
                Some(seen) => {
                    self.patch_finalizers(name, Some(uid), Some(seen), remove)
                        .await
                }
                None => Err(ClusterError::Conflict("no finalizer list seen".into())),
            };
            let outcome = match first {
                Err(ClusterError::Conflict(_)) => {
                    self.set_finalizers(name, Some(uid), remove).await
                }
                other => other,
            };
            match outcome {
                Err(ClusterError::NotFound(_)) => Ok(()),
                other => other,
            }
        })
        .await
    }

    async fn write_status(
        &self,
        name: &MaintenanceName,
        uid: &Uid,
        seen: StatusPrecondition,
        status: &MaintenanceStatus,
    ) -> Result<(), ClusterError> {
        let mut status = convert::crd_status(status);
        status.status_revision = Some(i64::try_from(seen.next_revision()).unwrap_or(i64::MAX));
        let body = status_patch::body(uid, seen, &status)
            .map_err(|e| ClusterError::Other(e.to_string()))?;
        // Sent as it is (kube's `Patch::Json` wants a tree of values, see `status_patch`).
        let request = http::Request::patch(format!(
            "/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances/{name}/status"
        ))
        .header(http::header::CONTENT_TYPE, "application/json-patch+json")
        .body(body)
        .map_err(|e| ClusterError::Other(e.to_string()))?;
        self.write("write status", async {
            self.client
                .request::<serde::de::IgnoredAny>(request)
                .await
                .map(drop)
                .map_err(to_cluster_error)
        })
        .await
    }

    async fn emit_event(&self, event: &Event) -> Result<(), ClusterError> {
        let new_event = event_writer::NewEvent {
            warning: event.type_ == EventType::Warning,
            reason: &event.reason,
            action: &event.reason,
            note: &event.message,
        };
        self.write("emit event", async {
            self.events
                .publish(&new_event, &event_reference(&event.target))
                .await
                .map_err(to_cluster_error)
        })
        .await
    }

    async fn get_node(&self, name: &NodeName) -> Result<Option<NodeState>, ClusterError> {
        let node = self.nodes().get_opt(name).await.map_err(to_cluster_error)?;
        Ok(node.as_ref().map(convert::node_state))
    }

    async fn patch_node(&self, patch: &NodePatch) -> Result<NodeState, ClusterError> {
        let document: json_patch::Patch = serde_json::from_value(node_patch::json_patch(patch))
            .map_err(|e| ClusterError::Other(e.to_string()))?;
        let node = self
            .write("patch node", async {
                self.nodes()
                    .patch(
                        &patch.node,
                        &PatchParams::default(),
                        &Patch::<()>::Json(document),
                    )
                    .await
                    .map_err(to_cluster_error)
            })
            .await?;
        Ok(convert::node_state(&node))
    }

    fn watch_node(&self, name: &NodeName) -> BoxStream<'static, Option<NodeState>> {
        self.nodes.follow(name)
    }

    fn watch_node_summaries(&self) -> BoxStream<'static, NodeSummaryEvent> {
        self.nodes.summaries()
    }

    async fn ensure_namespace(&self, namespace: &str) -> Result<(), ClusterError> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        if api
            .get_opt(namespace)
            .await
            .map_err(to_cluster_error)?
            .is_some()
        {
            return Ok(());
        }
        let object: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}}))
            .map_err(|e| ClusterError::Other(e.to_string()))?;
        let created = self
            .write("create namespace", async {
                api.create(&PostParams::default(), &object)
                    .await
                    .map_err(to_cluster_error)
            })
            .await;
        match created {
            Ok(_) | Err(ClusterError::AlreadyExists(_)) => Ok(()),
            Err(other) => Err(other),
        }
    }

    async fn get_lease(&self, namespace: &str, name: &str) -> Result<Option<Lease>, ClusterError> {
        let lease = self
            .leases(namespace)
            .get_opt(name)
            .await
            .map_err(to_cluster_error)?;
        Ok(lease.as_ref().map(convert::lease))
    }

    async fn list_leases(&self, namespace: &str) -> Result<Vec<Lease>, ClusterError> {
        let list = self
            .leases(namespace)
            .list(&ListParams::default())
            .await
            .map_err(to_cluster_error)?;
        Ok(list.items.iter().map(convert::lease).collect())
    }

    fn watch_lease(&self, namespace: &str, name: &str) -> BoxStream<'static, Option<Lease>> {
        let hub = self
            .leases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(namespace.to_string())
            .or_insert_with(|| {
                Arc::new(lease_hub::LeaseHub::new(
                    self.client.clone(),
                    namespace,
                    self.initial_lists.clone(),
                    self.health.clone(),
                ))
            })
            .clone();
        hub.follow(name)
    }

    async fn create_lease(&self, lease: &Lease, owner: &NodeOwner) -> Result<Lease, ClusterError> {
        let mut object = convert::kube_lease(lease, Some(owner));
        object.metadata.resource_version = None;
        let created = self
            .write("create lease", async {
                self.leases(&lease.namespace)
                    .create(&PostParams::default(), &object)
                    .await
                    .map_err(to_cluster_error)
            })
            .await?;
        Ok(convert::lease(&created))
    }

    async fn update_lease(&self, lease: &Lease) -> Result<Lease, ClusterError> {
        // A read-modify-write keeps what nmo does not model (owner references, labels); the
        // resourceVersion nmo read is the precondition.
        let api = self.leases(&lease.namespace);
        let mut object = api.get(&lease.name).await.map_err(to_cluster_error)?;
        if object.metadata.resource_version.as_deref() != Some(lease.resource_version.as_str()) {
            return Err(ClusterError::Conflict(format!(
                "lease {} changed since it was read",
                lease.name
            )));
        }
        object.spec = convert::kube_lease(lease, None).spec;
        let updated = self
            .write("update lease", async {
                api.replace(&lease.name, &PostParams::default(), &object)
                    .await
                    .map_err(to_cluster_error)
            })
            .await?;
        Ok(convert::lease(&updated))
    }

    async fn delete_lease(&self, lease: &Lease) -> Result<(), ClusterError> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: Some(lease.resource_version.clone()),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        self.write("delete lease", async {
            self.leases(&lease.namespace)
                .delete(&lease.name, &params)
                .await
                .map(drop)
                .map_err(to_cluster_error)
        })
        .await
    }

    async fn list_pods(&self, node: &NodeName) -> Result<PodList, ClusterError> {
        let params = ListParams::default().fields(&format!("spec.nodeName={node}"));
        let pods = Api::<SlimPod>::all(self.client.clone())
            .list(&params)
            .await
            .map_err(to_cluster_error)?;
        Ok(pods.items.iter().map(slim_pod::shared_pod_info).collect())
    }

    fn watch_pods(&self, node: &NodeName) -> BoxStream<'static, PodList> {
        let config =
            watch::per_node(watcher::Config::default().fields(&format!("spec.nodeName={node}")));
        watch::snapshots(
            Api::<SlimPod>::all(self.client.clone()),
            config,
            self.initial_lists.clone(),
            self.health.register(format!("pods on node {node}")),
            slim_pod::shared_pod_info,
        )
    }

    async fn daemonset_exists(
        &self,
        namespace: &str,
        name: &str,
        uid: &Uid,
    ) -> Result<bool, ClusterError> {
        let api: Api<DaemonSet> = Api::namespaced(self.client.clone(), namespace);
        let limit = self.call_timeout;
        // Bounded here, inside the cache's lock: every caller for this DaemonSet waits on this
        // one lookup, so it must never hang.
        let lookup = async move {
            let found = tokio::time::timeout(limit, api.get_opt(name))
                .await
                .map_err(|_| {
                    ClusterError::Transient(format!(
                        "look up DaemonSet {name}: no answer within {limit:?}"
                    ))
                })?
                .map_err(to_cluster_error)?;
            Ok(found.map(|ds| ds.metadata.uid.unwrap_or_default()))
        };
        self.daemonsets.exists(namespace, name, uid, lookup).await
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &Uid,
        grace_period_seconds: Option<i64>,
    ) -> Result<(), ClusterError> {
        let params = DeleteParams {
            grace_period_seconds: grace_period_seconds.and_then(|s| u32::try_from(s).ok()),
            preconditions: Some(uid_precondition(uid)),
            ..DeleteParams::default()
        };
        self.write("delete pod", async {
            self.pods(namespace)
                .delete(name, &params)
                .await
                .map(drop)
                .map_err(errors::deletion_error)
        })
        .await
    }

    async fn evict_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &Uid,
        grace_period_seconds: Option<i64>,
    ) -> Result<EvictionOutcome, ClusterError> {
        self.write("evict pod", async {
            eviction_outcome(
                eviction_request::send(&self.client, namespace, name, uid, grace_period_seconds)
                    .await,
            )
        })
        .await
    }

    fn watch_pdbs(&self) -> BoxStream<'static, PdbChange> {
        pdbs::watch_pdbs(
            self.client.clone(),
            self.initial_lists.clone(),
            self.health.register("PodDisruptionBudgets"),
        )
    }

    fn watch_eviction_webhooks(&self) -> BoxStream<'static, EvictionWebhooks> {
        eviction_webhooks::watch(
            self.client.clone(),
            self.initial_lists.clone(),
            &self.health,
        )
    }

    fn watch_vms(&self, node: &NodeName) -> BoxStream<'static, VmList> {
        vms::watch(
            self.client.clone(),
            self.initial_lists.clone(),
            self.health.clone(),
            self.kubevirt.clone(),
            node,
        )
    }

    async fn list_selected_pods(
        &self,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Result<Vec<PdbPod>, ClusterError> {
        pdbs::selected_pods(self.client.clone(), namespace, selector).await
    }

    async fn list_maintained_nodes(&self) -> Result<Vec<NodeState>, ClusterError> {
        pdbs::maintained_nodes(self.client.clone()).await
    }

    async fn list_maintenances(&self) -> Result<Vec<Maintenance>, ClusterError> {
        pdbs::maintenances(self.client.clone()).await
    }
}
