//! A simulated cluster with the NodeMaintenance CRD, and ways to read what nmo did to it.

use std::time::Duration;

use nmo_sim::{ClientOptions, Scenario, SimConfig, SimHandle, Simulator};
use serde_json::{Value, json};

/// The User-Agent of the operator's client, so the simulator counts its requests apart.
pub const OPERATOR_AGENT: &str = "nmo-operator";
/// The User-Agent of the test's own client.
pub const TEST_AGENT: &str = "nmo-test";

/// A simulator seeded with `scenario`, NodeMaintenance CRD installed, instant kubelet.
pub async fn start(scenario: Scenario) -> SimHandle {
    start_with(SimConfig::default().scenario(scenario).time_scale(0.0)).await
}

/// A simulator from `config`, NodeMaintenance CRD installed.
pub async fn start_with(config: SimConfig) -> SimHandle {
    let config = config
        .crd(&nmo::crd::definition())
        .expect("the CRD serializes");
    Simulator::start(config)
        .await
        .expect("the simulator starts")
}

/// A kube client for the operator, identified as [`OPERATOR_AGENT`].
pub fn operator_client(sim: &SimHandle) -> impl FnOnce() -> kube::Client + Send + 'static {
    operator_client_with_token(sim, None)
}

/// A kube client for the operator carrying a bearer token (for RBAC).
pub fn operator_client_with_token(
    sim: &SimHandle,
    token: Option<&str>,
) -> impl FnOnce() -> kube::Client + Send + 'static {
    let options = ClientOptions {
        user_agent: OPERATOR_AGENT.into(),
        token: token.map(str::to_string),
        ..ClientOptions::default()
    };
    let url = sim.base_url();
    move || client_for(&url, &options)
}

/// A kube client for the test itself.
pub fn test_client(sim: &SimHandle) -> kube::Client {
    test_client_with_token(sim, None)
}

/// A kube client for the test itself, carrying a bearer token.
pub fn test_client_with_token(sim: &SimHandle, token: Option<&str>) -> kube::Client {
    let options = ClientOptions {
        user_agent: TEST_AGENT.into(),
        token: token.map(str::to_string),
        ..ClientOptions::default()
    };
    client_for(&sim.base_url(), &options)
}

fn client_for(url: &str, options: &ClientOptions) -> kube::Client {
    let uri: http::Uri = url.parse().expect("the simulator's URL parses");
    let mut config = kube::Config::new(uri);
    config.default_namespace = "default".into();
    config.default_retry = options.retry;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_str(&options.user_agent).expect("a valid header"),
    ));
    if let Some(token) = &options.token {
        config.auth_info.token = Some(token.clone().into());
    }
    kube::Client::try_from(config).expect("a client for the simulator")
}

/// Creates a NodeMaintenance through the API, as an admin would.
pub async fn create_maintenance(client: &kube::Client, name: &str, node: &str) {
    let api: kube::Api<nmo::crd::NodeMaintenance> = kube::Api::all(client.clone());
    let object: nmo::crd::NodeMaintenance = serde_json::from_value(json!({
        "apiVersion": "nodemaintenance.medik8s.io/v1beta1",
        "kind": "NodeMaintenance",
        "metadata": {"name": name},
        "spec": {"nodeName": node, "reason": "end-to-end test"}
    }))
    .expect("a valid NodeMaintenance");
    api.create(&Default::default(), &object)
        .await
        .expect("the NodeMaintenance is created");
}

/// Deletes a NodeMaintenance through the API.
pub async fn delete_maintenance(client: &kube::Client, name: &str) {
    let api: kube::Api<nmo::crd::NodeMaintenance> = kube::Api::all(client.clone());
    api.delete(name, &Default::default())
        .await
        .expect("the NodeMaintenance is deleted");
}

/// The NodeMaintenance as stored.
pub fn maintenance(sim: &SimHandle, name: &str) -> Option<Value> {
    sim.get_json("nodemaintenance.medik8s.io", "nodemaintenances", "", name)
}

/// The Node as stored.
pub fn node(sim: &SimHandle, name: &str) -> Value {
    sim.get_json("", "nodes", "", name)
        .expect("the node exists")
}

/// The node's lease as stored.
pub fn lease(sim: &SimHandle, node: &str) -> Option<Value> {
    sim.get_json(
        "coordination.k8s.io",
        "leases",
        "medik8s-leases",
        &format!("node-{node}"),
    )
}

/// The pods bound to `node`.
pub fn pods_on(sim: &SimHandle, node: &str) -> Vec<Value> {
    sim.list_json("", "pods", "")
        .into_iter()
        .filter(|pod| pod["spec"]["nodeName"] == node)
        .collect()
}

/// The reasons of the events about the object named `name` (read as core/v1 events, the form
/// the API server stores both event APIs in and `kubectl describe` reads).
pub fn event_reasons(sim: &SimHandle, name: &str) -> Vec<String> {
    sim.list_json("", "events", "default")
        .into_iter()
        .filter(|event| event["involvedObject"]["name"] == name)
        .filter_map(|event| event["reason"].as_str().map(str::to_string))
        .collect()
}

/// Waits until `condition` holds, polling the store (which costs no API request).
pub async fn wait_for(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + timeout;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The phase of a NodeMaintenance, if any.
pub fn phase(sim: &SimHandle, name: &str) -> Option<String> {
    maintenance(sim, name).and_then(|nm| nm["status"]["phase"].as_str().map(str::to_string))
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

/// Creates a Running pod bound to `node` with label `app=<app>` and no owner (nothing
/// replaces it once evicted).
pub async fn create_pod(client: &kube::Client, namespace: &str, name: &str, node: &str, app: &str) {
    let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), namespace);
    let pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "main", "image": "registry.invalid/app:1"}]
        }
    }))
    .expect("a valid pod");
    api.create(&Default::default(), &pod)
        .await
        .expect("the pod is created");
}

/// Creates a PodDisruptionBudget over `app=<app>` with `minAvailable`.
pub async fn create_pdb(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    app: &str,
    min_available: i32,
) {
    let api: kube::Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        kube::Api::namespaced(client.clone(), namespace);
    let pdb = serde_json::from_value(json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}}
    }))
    .expect("a valid PDB");
    api.create(&Default::default(), &pdb)
        .await
        .expect("the PDB is created");
}

/// Lowers a PodDisruptionBudget's `minAvailable`, as an admin freeing a drain would.
pub async fn relax_pdb(client: &kube::Client, namespace: &str, name: &str, min_available: i32) {
    let api: kube::Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        kube::Api::namespaced(client.clone(), namespace);
    let patch = json!({"spec": {"minAvailable": min_available}});
    api.patch(name, &Default::default(), &kube::api::Patch::Merge(&patch))
        .await
        .expect("the PDB is patched");
}

/// Creates a namespace.
pub async fn create_namespace(client: &kube::Client, name: &str) {
    let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client.clone());
    let namespace =
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("a valid namespace");
    api.create(&Default::default(), &namespace)
        .await
        .expect("the namespace is created");
}

/// Whether a pod exists.
pub fn pod_exists(sim: &SimHandle, namespace: &str, name: &str) -> bool {
    sim.get_json("", "pods", namespace, name).is_some()
}

/// Creates the node lease as another medik8s operator would hold it, renewed `renewed_ago`
/// before now.
pub async fn create_foreign_lease(
    client: &kube::Client,
    node: &str,
    holder: &str,
    renewed_ago: Duration,
) {
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
        kube::Api::all(client.clone());
    if namespaces
        .get_opt("medik8s-leases")
        .await
        .expect("namespace lookup")
        .is_none()
    {
        create_namespace(client, "medik8s-leases").await;
    }
    let api: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(client.clone(), "medik8s-leases");
    let renewed =
        chrono::Utc::now() - chrono::Duration::from_std(renewed_ago).expect("a small duration");
    let renewed = renewed.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    let lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": format!("node-{node}"), "namespace": "medik8s-leases"},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 3600,
            "acquireTime": renewed,
            "renewTime": renewed,
            "leaseTransitions": 2
        }
    }))
    .expect("a valid lease");
    api.create(&Default::default(), &lease)
        .await
        .expect("the lease is created");
}

/// Deletes the node lease, as its foreign holder releasing it would.
pub async fn delete_lease(client: &kube::Client, node: &str) {
    let api: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(client.clone(), "medik8s-leases");
    api.delete(&format!("node-{node}"), &Default::default())
        .await
        .expect("the lease is deleted");
}

/// Applies a JSON merge patch to a node, as another controller or an admin would.
pub async fn patch_node(client: &kube::Client, node: &str, patch: Value) {
    let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
    api.patch(node, &Default::default(), &kube::api::Patch::Merge(&patch))
        .await
        .expect("the node is patched");
}

/// Waits until the NodeMaintenance `name` reports `phase`.
pub async fn wait_for_phase(sim: &SimHandle, name: &str, phase: &str) {
    let what = format!("{name} to be {phase}");
    wait_for(&what, Duration::from_secs(30), || {
        self::phase(sim, name).as_deref() == Some(phase)
    })
    .await;
}

/// Waits until the NodeMaintenance `name` is gone (its finalizer removed after the undo).
pub async fn wait_until_gone(sim: &SimHandle, name: &str) {
    let what = format!("{name} to be gone");
    wait_for(&what, Duration::from_secs(30), || {
        maintenance(sim, name).is_none()
    })
    .await;
}

/// Whether the NodeMaintenance's `lastError` mentions `text`.
pub fn last_error_mentions(sim: &SimHandle, name: &str, text: &str) -> bool {
    maintenance(sim, name)
        .and_then(|nm| nm["status"]["lastError"].as_str().map(|e| e.contains(text)))
        .unwrap_or(false)
}

/// Waits until the NodeMaintenance reports that the budget `pdb` blocks its drain.
pub async fn wait_until_blocked_by(sim: &SimHandle, name: &str, pdb: &str) {
    let what = format!("{name} to be blocked by {pdb}");
    wait_for(&what, Duration::from_secs(20), || {
        last_error_mentions(sim, name, pdb)
    })
    .await;
}
