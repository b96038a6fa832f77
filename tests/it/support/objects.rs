//! Reading and changing the cluster of a [`TestEnv`] through its admin client, the way an admin
//! or another controller would. Objects are read as the JSON the API server returns, so tests
//! assert on exactly what is stored.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Resource;
use kube::api::{
    Api, ApiResource, DynamicObject, GetParams, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::{GroupVersionKind, Request};
use kube::discovery::Scope;
use nmo::crd::NodeMaintenance;
use serde_json::{Value, json};

use super::TestEnv;
use super::names::Names;
use super::waits::Phase;

/// Where nmo and the other medik8s operators keep node leases.
const LEASE_NAMESPACE: &str = "medik8s-leases";

/// A NodeMaintenance named `name` with `spec` as written (for a spec `create_maintenance`
/// does not write, or one the API server should refuse), as `kubectl create` would send it.
pub fn maintenance_object(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "nodemaintenance.medik8s.io/v1beta1",
        "kind": "NodeMaintenance",
        "metadata": {"name": name},
        "spec": spec,
    })
}

/// The elements of a JSON array (none when `value` is not an array: absent, say).
pub fn elements(value: &Value) -> Vec<Value> {
    value.as_array().cloned().unwrap_or_default()
}

/// The taint keys on a node.
pub fn taint_keys(node: &Value) -> Vec<String> {
    node["spec"]["taints"]
        .as_array()
        .map(|taints| {
            taints
                .iter()
                .filter_map(|t| t["key"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

impl TestEnv {
    // -----------------------------------------------------------------------------------------
    // Reading.

    /// An object of kind `K` as stored (None when missing); `namespace` None for cluster-scoped
    /// kinds. Names as the test wrote them (see `names`): the namespace, and the name of a
    /// Node, NodeMaintenance or Namespace, are the test's own.
    pub async fn get_json<K>(&self, namespace: Option<&str>, name: &str) -> Option<Value>
    where
        K: Resource<DynamicType = ()>,
    {
        let namespace = self.names.namespace_opt(namespace);
        let name = self.cluster_name::<K>(name);
        let name = name.as_str();
        let request = Request::new(K::url_path(&(), namespace.as_deref()))
            .get(name, &GetParams::default())
            .expect("a GET request");
        match self.admin.request::<Value>(request).await {
            Ok(object) => Some(object),
            Err(kube::Error::Api(status)) if status.code == 404 => None,
            Err(error) => panic!("reading {} {name}: {error}", K::kind(&())),
        }
    }

    /// The objects of kind `K` (in `namespace`, as the test wrote it, or everywhere), as
    /// stored. (Selectors are sent as given: a node name in a field selector is the cluster's,
    /// `env.name(..)`.)
    pub async fn list_json<K>(&self, namespace: Option<&str>, params: &ListParams) -> Vec<Value>
    where
        K: Resource<DynamicType = ()>,
    {
        let namespace = self.names.namespace_opt(namespace);
        let request = Request::new(K::url_path(&(), namespace.as_deref()))
            .list(params)
            .expect("a LIST request");
        let mut list = self
            .admin
            .request::<Value>(request)
            .await
            .unwrap_or_else(|error| panic!("listing {}: {error}", K::plural(&())));
        match list["items"].take() {
            Value::Array(items) => items,
            // An empty list may come without items.
            Value::Null => Vec::new(),
            other => panic!("a {} list with items {other}", K::kind(&())),
        }
    }

    /// The NodeMaintenance as stored.
    pub async fn maintenance(&self, name: &str) -> Option<Value> {
        self.get_json::<NodeMaintenance>(None, name).await
    }

    /// The status of a NodeMaintenance (null when it has none or is gone).
    pub async fn status(&self, name: &str) -> Value {
        self.maintenance(name)
            .await
            .map(|nm| nm["status"].clone())
            .unwrap_or_default()
    }

    /// The phase of a NodeMaintenance, if any (a phase nmo does not know fails the test).
    pub async fn phase(&self, name: &str) -> Option<Phase> {
        let phase = self.maintenance(name).await?["status"]["phase"].clone();
        if phase.is_null() {
            return None;
        }
        Some(
            serde_json::from_value(phase.clone())
                .unwrap_or_else(|error| panic!("{name} has the phase {phase}: {error}")),
        )
    }

    /// The NodeMaintenance's `lastError` (empty when it has none, or is gone).
    pub async fn last_error(&self, name: &str) -> String {
        self.status(name).await["lastError"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Whether the NodeMaintenance's `lastError` mentions `text`.
    pub async fn last_error_mentions(&self, name: &str, text: &str) -> bool {
        self.maintenance(name)
            .await
            .and_then(|nm| nm["status"]["lastError"].as_str().map(|e| e.contains(text)))
            .unwrap_or(false)
    }

    /// The Node as stored.
    pub async fn node(&self, name: &str) -> Value {
        self.get_json::<Node>(None, name)
            .await
            .expect("the node exists")
    }

    /// The node's lease as stored.
    pub async fn lease(&self, node: &str) -> Option<Value> {
        self.get_json::<Lease>(Some(LEASE_NAMESPACE), &self.node_lease(node))
            .await
    }

    /// Who holds the node's lease (`spec.holderIdentity`); the lease must be there.
    pub async fn lease_holder(&self, node: &str) -> Value {
        let lease = self.lease(node).await;
        lease.unwrap_or_else(|| panic!("no lease of {node}"))["spec"]["holderIdentity"].clone()
    }

    /// The pods bound to `node`.
    pub async fn pods_on(&self, node: &str) -> Vec<Value> {
        let bound = ListParams::default().fields(&format!("spec.nodeName={}", self.name(node)));
        self.list_json::<Pod>(None, &bound).await
    }

    /// Whether a pod exists.
    pub async fn pod_exists(&self, namespace: &str, name: &str) -> bool {
        self.get_json::<Pod>(Some(namespace), name).await.is_some()
    }

    /// The core/v1 events in `default`, the namespace events about cluster-scoped objects go
    /// to (the API server stores both event APIs as core/v1 events, which `kubectl describe`
    /// reads).
    pub async fn events(&self) -> Vec<Value> {
        self.list_json::<Event>(Some("default"), &ListParams::default())
            .await
    }

    /// The reasons of the events about the object named `name` (a node or NodeMaintenance).
    pub async fn event_reasons(&self, name: &str) -> Vec<String> {
        self.event_reasons_as_named(&self.name(name)).await
    }

    /// The reasons of the events about the object the cluster names `name` (one whose name a
    /// test does not own, such as a CRD).
    pub async fn event_reasons_as_named(&self, name: &str) -> Vec<String> {
        self.events()
            .await
            .into_iter()
            .filter(|event| event["involvedObject"]["name"] == name)
            .filter_map(|event| event["reason"].as_str().map(str::to_string))
            .collect()
    }

    /// The cluster's name of an object of kind `K` the test named `name`.
    fn cluster_name<K: Resource<DynamicType = ()>>(&self, name: &str) -> String {
        match K::kind(&()).as_ref() {
            "Namespace" => self.names.namespace(name),
            kind if Names::owns_kind(kind) => self.names.name(name),
            _ => name.to_string(),
        }
    }

    /// The name of `node`'s lease in the lease namespace.
    fn node_lease(&self, node: &str) -> String {
        format!("node-{}", self.name(node))
    }

    // -----------------------------------------------------------------------------------------
    // Changing, as an admin.

    /// Creates a NodeMaintenance.
    pub async fn create_maintenance(&self, name: &str, node: &str) {
        let object: NodeMaintenance = serde_json::from_value(json!({
            "apiVersion": "nodemaintenance.medik8s.io/v1beta1",
            "kind": "NodeMaintenance",
            "metadata": {"name": self.name(name)},
            "spec": {"nodeName": self.name(node), "reason": "end-to-end test"}
        }))
        .expect("a valid NodeMaintenance");
        Api::<NodeMaintenance>::all(self.admin.clone())
            .create(&PostParams::default(), &object)
            .await
            .expect("the NodeMaintenance is created");
    }

    /// Creates a NodeMaintenance from its JSON as `kubectl create` would, returning the API
    /// server's refusal instead of failing (to test validation).
    pub async fn try_create_maintenance(&self, object: Value) -> Result<(), kube::Error> {
        // Untyped, so that fields nmo's type would refuse reach the API server as written.
        let object: DynamicObject =
            serde_json::from_value(self.names.object(object)).expect("an object with metadata");
        let resource = ApiResource::erase::<NodeMaintenance>(&());
        Api::<DynamicObject>::all_with(self.admin.clone(), &resource)
            .create(&PostParams::default(), &object)
            .await
            .map(drop)
    }

    /// The condition of type `type_` of a NodeMaintenance's status (null when absent).
    pub async fn condition(&self, name: &str, type_: &str) -> Value {
        self.status(name).await["conditions"]
            .as_array()
            .and_then(|conditions| conditions.iter().find(|c| c["type"] == type_).cloned())
            .unwrap_or_default()
    }

    /// The messages of the events with `reason` about the object named `name`.
    pub async fn event_messages(&self, name: &str, reason: &str) -> Vec<String> {
        let name = self.name(name);
        self.events()
            .await
            .into_iter()
            .filter(|event| event["involvedObject"]["name"] == name && event["reason"] == reason)
            .filter_map(|event| event["message"].as_str().map(str::to_string))
            .collect()
    }

    /// Deletes a NodeMaintenance (its finalizer keeps it until nmo has undone it).
    pub async fn delete_maintenance(&self, name: &str) {
        Api::<NodeMaintenance>::all(self.admin.clone())
            .delete(&self.name(name), &Default::default())
            .await
            .expect("the NodeMaintenance is deleted");
    }

    /// Creates a namespace. One shared by every test (`nmo-system`, `medik8s-leases`: see
    /// `names`) may be there already, as on a real cluster nmo is installed on.
    pub async fn create_namespace(&self, name: &str) {
        let cluster_name = self.ns(name);
        let namespace = serde_json::from_value(json!({"metadata": {"name": cluster_name}}))
            .expect("a valid namespace");
        match Api::<Namespace>::all(self.admin.clone())
            .create(&PostParams::default(), &namespace)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 && cluster_name == name => {}
            Err(error) => panic!("creating namespace {cluster_name}: {error}"),
        }
    }

    /// Creates a Running pod bound to `node` with label `app=<app>` and no owner (nothing
    /// replaces it once evicted).
    pub async fn create_pod(&self, namespace: &str, name: &str, node: &str, app: &str) {
        let namespace = &self.ns(namespace);
        let pod = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
            "spec": {
                "nodeName": self.name(node),
                "terminationGracePeriodSeconds": 5,
                "containers": [{"name": "main", "image": "registry.invalid/app:1"}]
            }
        }))
        .expect("a valid pod");
        Api::<Pod>::namespaced(self.admin.clone(), namespace)
            .create(&PostParams::default(), &pod)
            .await
            .expect("the pod is created");
    }

    /// Creates a PodDisruptionBudget over `app=<app>` with `minAvailable`.
    pub async fn create_pdb(&self, namespace: &str, name: &str, app: &str, min_available: i32) {
        let namespace = &self.ns(namespace);
        let pdb = serde_json::from_value(json!({
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}}
        }))
        .expect("a valid PDB");
        Api::<PodDisruptionBudget>::namespaced(self.admin.clone(), namespace)
            .create(&PostParams::default(), &pdb)
            .await
            .expect("the PDB is created");
    }

    /// Lowers a PodDisruptionBudget's `minAvailable`, as an admin freeing a drain would.
    pub async fn relax_pdb(&self, namespace: &str, name: &str, min_available: i32) {
        let patch = json!({"spec": {"minAvailable": min_available}});
        self.patch_json::<PodDisruptionBudget>(Some(namespace), name, patch)
            .await;
    }

    /// Creates the node lease as another medik8s operator would hold it, renewed `renewed_ago`
    /// before now.
    pub async fn create_foreign_lease(&self, node: &str, holder: &str, renewed_ago: Duration) {
        let renewed =
            chrono::Utc::now() - chrono::Duration::from_std(renewed_ago).expect("a small duration");
        self.create_foreign_lease_renewed(node, holder, renewed)
            .await;
    }

    /// Creates the node lease as another medik8s operator would hold it (for an hour), renewed
    /// at `renewed` by its clock (ahead of this one's, if in the future).
    pub async fn create_foreign_lease_renewed(
        &self,
        node: &str,
        holder: &str,
        renewed: chrono::DateTime<chrono::Utc>,
    ) {
        let namespaces = Api::<Namespace>::all(self.admin.clone());
        if namespaces
            .get_opt(LEASE_NAMESPACE)
            .await
            .expect("namespace lookup")
            .is_none()
        {
            self.create_namespace(LEASE_NAMESPACE).await;
        }
        let renewed = renewed.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
        let lease = serde_json::from_value(json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.node_lease(node), "namespace": LEASE_NAMESPACE},
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": 3600,
                "acquireTime": renewed,
                "renewTime": renewed,
                "leaseTransitions": 2
            }
        }))
        .expect("a valid lease");
        Api::<Lease>::namespaced(self.admin.clone(), LEASE_NAMESPACE)
            .create(&PostParams::default(), &lease)
            .await
            .expect("the lease is created");
    }

    /// Overwrites the node lease with `holder` and a fresh renewal, as another operator forcing
    /// a takeover (or an admin) would; returns the lease as written.
    pub async fn take_over_lease(&self, node: &str, holder: &str) -> Value {
        let now = chrono::Utc::now()
            .format("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string();
        let patch = json!({"spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 3600,
            "acquireTime": now,
            "renewTime": now,
        }});
        self.patch_json_result::<Lease>(Some(LEASE_NAMESPACE), &self.node_lease(node), patch)
            .await
            .expect("the lease is taken over")
    }

    /// Deletes the node lease, as its foreign holder releasing it would.
    pub async fn delete_lease(&self, node: &str) {
        Api::<Lease>::namespaced(self.admin.clone(), LEASE_NAMESPACE)
            .delete(&self.node_lease(node), &Default::default())
            .await
            .expect("the lease is deleted");
    }

    /// Applies a JSON merge patch to an object of kind `K`, as an admin would (e.g. removing a
    /// NodeMaintenance's finalizer by hand). Names as the test wrote them (see `get_json`).
    pub async fn patch_json<K>(&self, namespace: Option<&str>, name: &str, patch: Value)
    where
        K: Resource<DynamicType = ()>,
    {
        if let Err(error) = self.patch_json_result::<K>(namespace, name, patch).await {
            panic!("patching {} {name}: {error}", K::kind(&()));
        }
    }

    /// [`Self::patch_json`], returning the API server's refusal instead of failing (to test
    /// validation).
    pub async fn patch_json_result<K>(
        &self,
        namespace: Option<&str>,
        name: &str,
        patch: Value,
    ) -> Result<Value, kube::Error>
    where
        K: Resource<DynamicType = ()>,
    {
        let namespace = self.names.namespace_opt(namespace);
        let name = self.cluster_name::<K>(name);
        let request = Request::new(K::url_path(&(), namespace.as_deref()))
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .expect("a PATCH request");
        self.admin.request::<Value>(request).await
    }

    /// Applies a JSON merge patch to a pod's status, as its kubelet would.
    pub async fn patch_pod_status(&self, namespace: &str, name: &str, status: Value) {
        Api::<Pod>::namespaced(self.admin.clone(), &self.ns(namespace))
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": status})),
            )
            .await
            .expect("the pod's status is patched");
    }

    /// Applies a JSON merge patch to a node, as another controller or an admin would.
    pub async fn patch_node(&self, node: &str, patch: Value) {
        self.patch_json::<Node>(None, node, patch).await;
    }

    /// Applies a JSON merge patch to a node's status, as its kubelet or the node controller
    /// would.
    pub async fn patch_node_status(&self, node: &str, status: Value) {
        Api::<Node>::all(self.admin.clone())
            .patch_status(
                &self.name(node),
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": status})),
            )
            .await
            .expect("the node status is patched");
    }

    /// Creates any object (its kind found through discovery), then writes its `status`, if it
    /// has one, through the status subresource: an API server ignores a status on create.
    /// Names as the test wrote them: its namespace, the name of a Node, NodeMaintenance or
    /// Namespace, and the node of a Pod or NodeMaintenance are the test's own (see `names`).
    pub async fn create_object(&self, object: Value) {
        let object = self.names.object(object);
        let (group, version) = match object["apiVersion"].as_str() {
            Some(api_version) => match api_version.split_once('/') {
                Some((group, version)) => (group, version),
                None => ("", api_version),
            },
            None => panic!("no apiVersion in {object}"),
        };
        let kind = object["kind"].as_str().expect("a kind");
        let (resource, capabilities) =
            kube::discovery::pinned_kind(&self.admin, &GroupVersionKind::gvk(group, version, kind))
                .await
                .unwrap_or_else(|error| panic!("no resource for {kind}: {error}"));
        let namespace = object["metadata"]["namespace"].as_str();
        let api: Api<DynamicObject> = match (capabilities.scope, namespace) {
            (Scope::Namespaced, Some(namespace)) => {
                Api::namespaced_with(self.admin.clone(), namespace, &resource)
            }
            _ => Api::all_with(self.admin.clone(), &resource),
        };
        let dynamic: DynamicObject =
            serde_json::from_value(object.clone()).expect("an object with metadata");
        let created = api
            .create(&PostParams::default(), &dynamic)
            .await
            .unwrap_or_else(|error| panic!("creating {kind}: {error}"));
        let has_status = capabilities
            .subresources
            .iter()
            .any(|(sub, _): &(ApiResource, _)| sub.plural == "status");
        if has_status && !object["status"].is_null() {
            let name = created.metadata.name.expect("a name");
            let status = json!({"status": object["status"]});
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .unwrap_or_else(|error| panic!("writing the status of {kind} {name}: {error}"));
        }
    }
}
