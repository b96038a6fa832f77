//! A simulated cluster with the NodeMaintenance CRD, and ways to read what nmo did to it.

use std::time::Duration;

use nmo::sim::{ClientOptions, Query, Scenario, SimConfig, SimHandle, Simulator};
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
    let options = ClientOptions {
        user_agent: OPERATOR_AGENT.into(),
        ..ClientOptions::default()
    };
    let url = sim.base_url();
    move || client_for(&url, &options)
}

/// A kube client for the test itself.
pub fn test_client(sim: &SimHandle) -> kube::Client {
    let options = ClientOptions {
        user_agent: TEST_AGENT.into(),
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
    kube::Client::try_from(config).expect("a client for the simulator")
}

/// Requests the operator made.
pub fn operator_requests(sim: &SimHandle, query: Query) -> u64 {
    sim.requests(&query.user_agent(OPERATOR_AGENT))
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

/// The reasons of the events (events.k8s.io) about the object named `name`.
pub fn event_reasons(sim: &SimHandle, name: &str) -> Vec<String> {
    sim.list_json("events.k8s.io", "events", "default")
        .into_iter()
        .filter(|event| event["regarding"]["name"] == name)
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
