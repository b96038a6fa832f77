//! The port to Kubernetes: every operation the actors need, in domain types. The root crate
//! implements it for `kube::Client`; `crate::fake` (feature `fake`) implements it in memory for tests.

use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::interception::EvictionWebhooks;
use crate::model::{
    Event, Lease, Maintenance, MaintenanceName, MaintenanceStatus, NodeName, NodeOwner, NodePatch,
    NodeState, NodeSummaryEvent, PodList, StatusPrecondition, Uid, VmList,
};
use crate::pdb::PdbPod;
use crate::pdb::{LabelSelector, PdbChange};

/// A failed cluster operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// The object does not exist (404).
    #[error("not found: {0}")]
    NotFound(String),
    /// Optimistic concurrency failed: stale resourceVersion (409) or a failed JSON patch `test`.
    #[error("conflict: {0}")]
    Conflict(String),
    /// Create of an object that already exists (409 AlreadyExists).
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// The request was refused as invalid (400/422 other than a failed `test`).
    #[error("invalid: {0}")]
    Invalid(String),
    /// RBAC refused the request (401/403).
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// A failure worth retrying: timeout, connection error, 429 throttling, 5xx.
    #[error("transient: {0}")]
    Transient(String),
    /// Refused before it was sent: this replica is not (or no longer) the leader, so it must
    /// not write (leader handover, or renewals that missed their deadline).
    #[error("not the leader: {0}")]
    NotLeader(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// The result of one `policy/v1` Eviction request that reached the API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvictionOutcome {
    /// 201: the pod is being deleted with its own grace period.
    Evicted,
    /// 404: the pod is already gone (counts as success); or 409 on its uid precondition: a pod
    /// of that name exists, but it is another one (the pod decided on is gone).
    NotFound,
    /// 429 with a disruption budget cause: evicting now would violate a PodDisruptionBudget.
    BlockedByPdb {
        /// The PDB's name when the API names it (cause / message), else None.
        pdb: Option<String>,
        /// The API's cause text, e.g. "The disruption budget web needs 2 healthy pods and has 2
        /// currently".
        message: String,
        /// `Retry-After`, if the server sent one.
        retry_after: Option<Duration>,
    },
    /// 500 "This pod has more than one PodDisruptionBudget, which the eviction subresource does
    /// not support."
    TooManyPdbs {
        /// The API's message.
        message: String,
    },
    /// 429 without a disruption budget cause: API priority and fairness throttling.
    Throttled {
        /// `Retry-After`, if the server sent one.
        retry_after: Option<Duration>,
    },
    /// 403 with cause NamespaceTerminating: the pod's namespace is being deleted; wait.
    NamespaceTerminating,
    /// An admission webhook on `pods/eviction` refused the request, with whatever code it
    /// chose (KubeVirt answers 429, Strimzi's Drain Cleaner 500, the API server's default is
    /// 403): the webhook acts on the request (a migration, a rolling restart); ask again.
    DeniedByWebhook {
        /// The webhook's name, as the API server quotes it.
        webhook: String,
        /// The API server's message (`admission webhook "<name>" denied the request: ...`).
        message: String,
        /// The HTTP status code of the refusal.
        code: u16,
    },
}

/// Every Kubernetes operation the actors use. Object safe; used as `Arc<dyn Cluster>`.
///
/// Conventions: cluster-scoped names only for NodeMaintenances and Nodes; a 404 is
/// `ClusterError::NotFound` except where a method returns `Option` or says otherwise.
#[async_trait]
pub trait Cluster: Send + Sync + 'static {
    // --- NodeMaintenance -------------------------------------------------------------------

    /// Reads one NodeMaintenance; None if it does not exist.
    async fn get_maintenance(
        &self,
        name: &MaintenanceName,
    ) -> Result<Option<Maintenance>, ClusterError>;

    /// Adds the finalizer `foregroundDeleteNodeMaintenance` if absent, keeping other finalizers.
    /// `seen` is the finalizer list as last seen: an adapter may write against it without
    /// reading first, but must re-read when it turns out stale.
    async fn add_finalizer(
        &self,
        name: &MaintenanceName,
        seen: &[String],
    ) -> Result<(), ClusterError>;

    /// Removes the finalizer `foregroundDeleteNodeMaintenance` if present, keeping others, from
    /// the NodeMaintenance `name` whose uid is `uid`. A missing object, or one of that name
    /// with another uid (deleted and created again meanwhile), is Ok: nothing of ours is left
    /// to release. `seen` is the finalizer list as last seen: an adapter may write against it
    /// without reading first, but must re-read when it turns out stale.
    async fn remove_finalizer(
        &self,
        name: &MaintenanceName,
        uid: &Uid,
        seen: &[String],
    ) -> Result<(), ClusterError>;

    /// Writes `status` (status subresource) to the NodeMaintenance `name` whose uid is `uid`,
    /// only if its status is still the one `seen` describes (the status its writer last saw),
    /// stamped with revision `seen.next_revision()`. Another object of that name, or a status
    /// changed since, is `Conflict` and nothing is written: the writer reads the status again
    /// before it writes. Status fields nmo does not know are kept.
    async fn write_status(
        &self,
        name: &MaintenanceName,
        uid: &Uid,
        seen: StatusPrecondition,
        status: &MaintenanceStatus,
    ) -> Result<(), ClusterError>;

    /// Emits an event (namespace `default`).
    async fn emit_event(&self, event: &Event) -> Result<(), ClusterError>;

    // --- Node -----------------------------------------------------------------------------

    /// Reads a node; None if it does not exist.
    async fn get_node(&self, name: &NodeName) -> Result<Option<NodeState>, ClusterError>;

    /// Applies label + taints + cordon as one JSON patch whose first op tests the taints (see
    /// [`NodePatch`]); returns the node as written. A failed test is `Conflict`.
    async fn patch_node(&self, patch: &NodePatch) -> Result<NodeState, ClusterError>;

    /// Follows one node: yields the current state at start and after every change (a change
    /// not yet read may be replaced by a newer one), None while the node does not exist. The
    /// kube adapter serves every node from one shared watch of all Nodes. It retries watch
    /// errors itself; the stream ends only if it gives up (the actor then re-subscribes).
    fn watch_node(&self, name: &NodeName) -> BoxStream<'static, Option<NodeState>>;

    /// Watches every node, reduced to a [`crate::model::NodeSummary`] each (the cluster
    /// maintenance budget counts unavailable nodes): a `Listed` after every (re)list, then the
    /// changes. Only ever called when a PDB needs it. The kube adapter serves it from the
    /// same shared watch of all Nodes as [`Cluster::watch_node`] (listed in pages, each Node
    /// kept only as the little nmo reads), and retries watch errors itself; the stream ends
    /// only if it gives up.
    fn watch_node_summaries(&self) -> BoxStream<'static, NodeSummaryEvent>;

    // --- Lease ----------------------------------------------------------------------------

    /// Creates the namespace if it does not exist (leases live in their own namespace).
    async fn ensure_namespace(&self, namespace: &str) -> Result<(), ClusterError>;

    /// Reads a lease; None if it does not exist.
    async fn get_lease(&self, namespace: &str, name: &str) -> Result<Option<Lease>, ClusterError>;

    /// Every lease in a namespace (the node leases of all medik8s operators: one per node at
    /// most, usually few), for the orphan sweep.
    async fn list_leases(&self, namespace: &str) -> Result<Vec<Lease>, ClusterError>;

    /// Follows one lease of `namespace`: yields its state once the watch has listed and after
    /// every change (a change not yet read may be replaced by a newer one), None while it does
    /// not exist, so that a node actor learns at once when another holder takes its node's
    /// lease. The kube adapter serves every lease of a namespace from one shared watch (the
    /// node leases of all medik8s operators: one per node in maintenance or remediation at
    /// most). Same retry contract as [`Cluster::watch_node`].
    fn watch_lease(&self, namespace: &str, name: &str) -> BoxStream<'static, Option<Lease>>;

    /// Creates a lease with an ownerReference to `owner` (`v1/Node`). `AlreadyExists` if taken.
    async fn create_lease(&self, lease: &Lease, owner: &NodeOwner) -> Result<Lease, ClusterError>;

    /// Updates a lease's spec, with `lease.resource_version` as precondition (stale = `Conflict`).
    async fn update_lease(&self, lease: &Lease) -> Result<Lease, ClusterError>;

    /// Deletes a lease with `lease.resource_version` as precondition (stale = `Conflict`,
    /// gone = `NotFound`).
    async fn delete_lease(&self, lease: &Lease) -> Result<(), ClusterError>;

    // --- Pods -----------------------------------------------------------------------------

    /// Lists every pod on a node (`fieldSelector=spec.nodeName=<node>`).
    async fn list_pods(&self, node: &NodeName) -> Result<PodList, ClusterError>;

    /// Watches the pods of a node (`fieldSelector=spec.nodeName=<node>`): yields the complete
    /// list at start and after every change. Same retry contract as [`Cluster::watch_node`].
    fn watch_pods(&self, node: &NodeName) -> BoxStream<'static, PodList>;

    /// Whether the DaemonSet `namespace/name` with uid `uid` exists (to tell an orphan
    /// DaemonSet pod from a managed one): one of that name with another uid (deleted and
    /// created again) is not it. An empty `uid` matches any.
    async fn daemonset_exists(
        &self,
        namespace: &str,
        name: &str,
        uid: &Uid,
    ) -> Result<bool, ClusterError>;

    /// Deletes the pod `namespace/name` whose uid is `uid` (`deleteOptions.preconditions.uid`),
    /// with the given grace period (None = the pod's own). Gone = `NotFound`, and so is a pod of
    /// that name with another uid (deleted and created again meanwhile: not the pod decided on).
    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &Uid,
        grace_period_seconds: Option<i64>,
    ) -> Result<(), ClusterError>;

    /// Evicts the pod `namespace/name` whose uid is `uid` through `policy/v1` Eviction, with
    /// `uid` as the eviction's precondition (the pod's own grace period unless given). A pod of
    /// that name with another uid is [`EvictionOutcome::NotFound`]: the pod decided on is gone.
    /// Refusals the drain understands are `Ok(outcome)`; anything else is `Err`.
    async fn evict_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &Uid,
        grace_period_seconds: Option<i64>,
    ) -> Result<EvictionOutcome, ClusterError>;

    // --- Drain policy: PDBs and why a drain is blocked -----------------------------------

    /// Watches every PodDisruptionBudget (one shared watch: PDBs are few): the complete
    /// list first and after every relist ([`PdbChange::Listed`]), then each change. Same
    /// retry contract as [`Cluster::watch_node`].
    fn watch_pdbs(&self) -> BoxStream<'static, PdbChange>;

    /// Watches the Validating and Mutating WebhookConfigurations, read only, reduced to the
    /// webhooks whose rules match `pods/eviction` (something acts on eviction requests): the
    /// complete set at start and after every change. Same retry contract as
    /// [`Cluster::watch_node`]; an adapter that may not read them yields an empty set once.
    fn watch_eviction_webhooks(&self) -> BoxStream<'static, EvictionWebhooks>;

    /// Watches the KubeVirt VirtualMachineInstances on a node (`kubevirt.io/v1`, read only,
    /// label `kubevirt.io/nodeName=<node>`): the complete list at start and after every change.
    /// Where the API is not served (no KubeVirt) nothing is delivered and the adapter looks
    /// again now and then, quietly. Same retry contract as [`Cluster::watch_node`].
    fn watch_vms(&self, node: &NodeName) -> BoxStream<'static, VmList>;

    /// Lists the pods of `namespace` that `selector` selects (a PDB's pods), to find the
    /// one a blocked PDB waits for. One bounded LIST.
    async fn list_selected_pods(
        &self,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Result<Vec<PdbPod>, ClusterError>;

    /// Lists the nodes carrying nmo's maintenance label
    /// ([`crate::model::EXCLUDE_LABEL`]): the nodes cordoned by maintenances (and those the
    /// orphan sweep looks at). One LIST, bounded by the number of nodes in maintenance.
    async fn list_maintained_nodes(&self) -> Result<Vec<NodeState>, ClusterError>;

    /// Lists every NodeMaintenance (to name the maintenance of a cordoned node; the orphan
    /// sweep's fresh view).
    async fn list_maintenances(&self) -> Result<Vec<Maintenance>, ClusterError>;
}
