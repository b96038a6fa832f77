//! Nodes without a kubelet.
//!
//! A registered node is created Ready, with capacity, allocatable, addresses and node info as
//! a kubelet reports them, plus its Lease in `kube-node-lease`. The controller manager's node
//! lifecycle controller (v1.36) takes a node's health from the later of its Ready condition's
//! `lastHeartbeatTime` and its Lease's `renewTime`: once neither has moved for
//! `--node-monitor-grace-period` (50 s by default) it sets the node's conditions to Unknown,
//! taints it `node.kubernetes.io/unreachable` (NoSchedule, then NoExecute, which evicts its
//! pods after their toleration, 300 s by default). A real kubelet renews the Lease every 10 s
//! and rewrites its status only every 5 minutes or on change; the harness does the same for
//! the Lease, from the control plane's own runtime, so registered nodes stay Ready for as long
//! as the control plane runs. The lifecycle controller itself stays on, because its other
//! work (e.g. the `node.kubernetes.io/unschedulable` taint that follows `spec.unschedulable`)
//! is part of what a real cluster does to a cordoned node.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::calls::{self, within};
use crate::error::{Error, Result};

/// The namespace of node heartbeat leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// What a kubelet's lease says: the controller treats the node as lost after the grace
/// period, whatever this says, but a real kubelet writes 40 s.
const LEASE_DURATION_SECONDS: i32 = 40;

/// Distinct made-up addresses (TEST-NET-2, never routed) for the nodes of one process.
static ADDRESSES: AtomicU32 = AtomicU32::new(0);

/// A node to register.
#[derive(Clone, Debug)]
pub struct NodeTemplate {
    /// The node's name.
    pub name: String,
    /// Labels besides the well-known ones (`kubernetes.io/hostname`, `/os`, `/arch`).
    pub labels: BTreeMap<String, String>,
    /// Taints (`{key, value, effect}`) it starts with.
    pub taints: Vec<Value>,
    /// Capacity and allocatable CPU (a quantity).
    pub cpu: String,
    /// Capacity and allocatable memory (a quantity).
    pub memory: String,
    /// Capacity and allocatable pods.
    pub pods: String,
    /// Whether the harness renews its Lease (off: the node lifecycle controller, when running,
    /// marks it Unknown after the grace period, as for a node that went away).
    pub heartbeat: bool,
}

impl NodeTemplate {
    /// A Ready node named `name` with 8 CPUs, 32 GiB and 110 pods, kept Ready.
    pub fn new(name: impl Into<String>) -> NodeTemplate {
        NodeTemplate {
            name: name.into(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            cpu: "8".into(),
            memory: "32Gi".into(),
            pods: "110".into(),
            heartbeat: true,
        }
    }

    /// Adds a label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> NodeTemplate {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Adds a taint (`effect`: NoSchedule, PreferNoSchedule or NoExecute).
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> NodeTemplate {
        self.taints
            .push(json!({"key": key, "value": value, "effect": effect}));
        self
    }

    /// Sets capacity and allocatable.
    pub fn capacity(mut self, cpu: &str, memory: &str, pods: &str) -> NodeTemplate {
        (self.cpu, self.memory, self.pods) = (cpu.into(), memory.into(), pods.into());
        self
    }

    /// Registers the node without renewing its Lease.
    pub fn without_heartbeat(mut self) -> NodeTemplate {
        self.heartbeat = false;
        self
    }

    /// The Node object, status included.
    fn object(&self) -> Value {
        let mut labels = BTreeMap::from([
            ("kubernetes.io/hostname".to_string(), self.name.clone()),
            ("kubernetes.io/os".to_string(), "linux".to_string()),
            ("kubernetes.io/arch".to_string(), "amd64".to_string()),
        ]);
        labels.extend(self.labels.clone());
        let n = ADDRESSES.fetch_add(1, Ordering::Relaxed);
        let address = format!("198.51.{}.{}", 100 + (n / 250) % 100, 1 + n % 250);
        let now = calls::now_time();
        let resources = json!({
            "cpu": self.cpu, "memory": self.memory, "pods": self.pods,
            "ephemeral-storage": "100Gi",
        });
        let condition = |kind: &str, status: &str, reason: &str, message: &str| {
            json!({"type": kind, "status": status, "reason": reason, "message": message,
                   "lastHeartbeatTime": now, "lastTransitionTime": now})
        };
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels},
            "spec": {"taints": self.taints},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [
                    condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                    condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                    condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                    condition("Ready", "True", "KubeletReady", "kubelet is posting ready status (nmo-envtest stand-in)"),
                ],
                "addresses": [
                    {"type": "InternalIP", "address": address},
                    {"type": "Hostname", "address": self.name},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "machineID": format!("{:032x}", n + 1),
                    "systemUUID": format!("00000000-0000-0000-0000-{:012x}", n + 1),
                    "bootID": format!("00000000-0000-0000-0001-{:012x}", n + 1),
                    "kernelVersion": "6.1.0-nmo-envtest",
                    "osImage": "nmo-envtest (no kubelet)",
                    "containerRuntimeVersion": "none://0.0.0",
                    "kubeletVersion": "v1.36.2",
                    "kubeProxyVersion": "",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
            },
        })
    }
}

/// The nodes whose leases the harness renews.
#[derive(Default)]
pub struct Heartbeats {
    nodes: Mutex<BTreeSet<String>>,
}

impl Heartbeats {
    fn set(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.nodes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts renewing `node`'s lease.
    pub fn start(&self, node: &str) {
        self.set().insert(node.to_string());
    }

    /// Stops renewing `node`'s lease; whether it was renewed.
    pub fn stop(&self, node: &str) -> bool {
        self.set().remove(node)
    }

    /// The nodes kept alive.
    pub fn nodes(&self) -> Vec<String> {
        self.set().iter().cloned().collect()
    }
}

/// Creates the node (a repeat finds it already there) and its lease.
pub async fn register(client: &kube::Client, template: &NodeTemplate) -> Result<Node> {
    let nodes: Api<Node> = Api::all(client.clone());
    let object: Node = serde_json::from_value(template.object()).map_err(|source| Error::Json {
        context: format!("the Node {}", template.name),
        source,
    })?;
    let what = format!("creating node {}", template.name);
    let node = match within(&what, nodes.create(&PostParams::default(), &object)).await {
        Ok(node) => node,
        Err(error) if calls::is_status(&error, 409) => {
            within(
                format!("reading node {}", template.name),
                nodes.get(&template.name),
            )
            .await?
        }
        Err(error) => return Err(error),
    };
    let node = if has_ready_condition(&node) {
        node
    } else {
        // Kept for API servers that drop a new node's status: write it through /status.
        let status = json!({"status": object_status(&template.object())});
        within(
            format!("writing the status of node {}", template.name),
            nodes.patch_status(
                &template.name,
                &PatchParams::default(),
                &Patch::Merge(&status),
            ),
        )
        .await?
    };
    let node = without_admission_taint(client, template, node).await?;
    create_lease(client, &node).await?;
    Ok(node)
}

/// The taint the NodeTaint admission plugin puts on every node it admits, until the node
/// lifecycle controller sees the node Ready and removes it (within its 5 s monitor period).
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// The node with the taints of its template only: a registered node is Ready from the start,
/// so the admission plugin's `not-ready` taint goes at once rather than at the lifecycle
/// controller's next pass, and the node is schedulable (and its taints are the test's own) as
/// soon as `register` returns. A JSON patch whose `test` is the taints as read, so a taint
/// someone added meanwhile is never lost (the patch then fails and is left to the controller).
async fn without_admission_taint(
    client: &kube::Client,
    template: &NodeTemplate,
    node: Node,
) -> Result<Node> {
    let taints = node
        .spec
        .as_ref()
        .and_then(|spec| spec.taints.clone())
        .unwrap_or_default();
    let admitted = taints.iter().any(|taint| taint.key == NOT_READY_TAINT);
    let wanted = template
        .taints
        .iter()
        .any(|taint| taint["key"] == NOT_READY_TAINT);
    if !admitted || wanted {
        return Ok(node);
    }
    let kept: Vec<_> = taints
        .iter()
        .filter(|taint| taint.key != NOT_READY_TAINT)
        .collect();
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/spec/taints", "value": taints},
        {"op": "replace", "path": "/spec/taints", "value": kept},
    ]))
    .map_err(|source| Error::Json {
        context: format!("the taints of node {}", template.name),
        source,
    })?;
    let nodes: Api<Node> = Api::all(client.clone());
    match within(
        format!("removing the admission taint of node {}", template.name),
        nodes.patch(
            &template.name,
            &PatchParams::default(),
            &Patch::Json::<()>(patch),
        ),
    )
    .await
    {
        Ok(node) => Ok(node),
        // Changed meanwhile (422: the test failed): the lifecycle controller removes it.
        Err(error) if calls::is_status(&error, 422) => Ok(node),
        Err(error) => Err(error),
    }
}

fn object_status(object: &Value) -> Value {
    object.get("status").cloned().unwrap_or(Value::Null)
}

fn has_ready_condition(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|condition| condition.type_ == "Ready" && condition.status == "True")
        })
}

/// The node's heartbeat lease, owned by the node (the garbage collector removes it with the
/// node). A repeat finds it there.
async fn create_lease(client: &kube::Client, node: &Node) -> Result<()> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let uid = node.metadata.uid.clone().unwrap_or_default();
    let leases: Api<Lease> = Api::namespaced(client.clone(), NODE_LEASE_NAMESPACE);
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "namespace": NODE_LEASE_NAMESPACE,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}],
        },
        "spec": {
            "holderIdentity": name,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "renewTime": calls::now_micro_time(),
        },
    }))
    .map_err(|source| Error::Json {
        context: format!("the lease of node {name}"),
        source,
    })?;
    match within(
        format!("creating the lease of node {name}"),
        leases.create(&PostParams::default(), &lease),
    )
    .await
    {
        Ok(_) => Ok(()),
        Err(error) if calls::is_status(&error, 409) => Ok(()),
        Err(error) => Err(error),
    }
}

/// What one renewal found.
#[derive(Debug, PartialEq, Eq)]
pub enum Renewal {
    /// The lease was renewed (or recreated).
    Renewed,
    /// The node is gone: stop renewing.
    NodeGone,
}

/// Renews `node`'s lease, recreating it if it is gone while the node is not.
pub async fn renew(client: &kube::Client, node: &str) -> Result<Renewal> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NODE_LEASE_NAMESPACE);
    let patch = json!({"spec": {"renewTime": calls::now_micro_time(), "holderIdentity": node}});
    let renewed = within(
        format!("renewing the lease of node {node}"),
        leases.patch(node, &PatchParams::default(), &Patch::Merge(&patch)),
    )
    .await;
    match renewed {
        Ok(_) => Ok(Renewal::Renewed),
        Err(error) if calls::is_status(&error, 404) => {
            let nodes: Api<Node> = Api::all(client.clone());
            match within(format!("reading node {node}"), nodes.get(node)).await {
                Ok(found) => {
                    create_lease(client, &found).await?;
                    Ok(Renewal::Renewed)
                }
                Err(error) if calls::is_status(&error, 404) => Ok(Renewal::NodeGone),
                Err(error) => Err(error),
            }
        }
        Err(error) => Err(error),
    }
}

/// How many node leases are renewed at once. One at a time, a round costs a round trip per
/// node: at 500 nodes and 100 ms a round trip on a loaded machine, that is the whole grace
/// period, after which the lifecycle controller makes nodes Unknown and unschedulable.
const RENEWALS_IN_FLIGHT: usize = 32;

/// Renews the leases of `heartbeats`' nodes every `interval`, forever (the task ends with the
/// control plane's runtime), [`RENEWALS_IN_FLIGHT`] at a time. A failed renewal is retried at
/// the next tick, well within the grace period.
pub async fn keep_alive(client: kube::Client, heartbeats: Arc<Heartbeats>, interval: Duration) {
    use futures::StreamExt as _;

    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        futures::stream::iter(heartbeats.nodes())
            .for_each_concurrent(RENEWALS_IN_FLIGHT, |node: String| {
                let (client, heartbeats) = (&client, &heartbeats);
                async move {
                    match renew(client, &node).await {
                        Ok(Renewal::Renewed) => {}
                        Ok(Renewal::NodeGone) => {
                            heartbeats.stop(&node);
                        }
                        Err(error) => {
                            tracing::warn!(%node, %error, "renewing a node lease failed");
                        }
                    }
                }
            })
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_object_is_a_ready_node_with_resources() {
        let template = NodeTemplate::new("n1")
            .label("role", "worker")
            .taint("dedicated", "x", "NoSchedule")
            .capacity("4", "8Gi", "50");
        let node: Node = serde_json::from_value(template.object()).unwrap();
        assert!(has_ready_condition(&node));
        let labels = node.metadata.labels.unwrap();
        assert_eq!(labels["role"], "worker");
        assert_eq!(labels["kubernetes.io/hostname"], "n1");
        let status = node.status.unwrap();
        assert_eq!(status.allocatable.unwrap()["pods"].0, "50");
        assert_eq!(node.spec.unwrap().taints.unwrap()[0].key, "dedicated");
    }

    #[test]
    fn heartbeats_start_and_stop() {
        let heartbeats = Heartbeats::default();
        heartbeats.start("a");
        heartbeats.start("b");
        assert!(heartbeats.stop("a"));
        assert!(!heartbeats.stop("a"));
        assert_eq!(heartbeats.nodes(), ["b"]);
    }
}
