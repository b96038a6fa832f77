//! Objects the cases create, the same on both servers.

use serde_json::{Value, json};

use super::harness::{Pair, Req};

/// A small pod labelled `app`, bound to `node`, or with no node ("") and a scheduler no one
/// runs (so neither server's scheduler touches it).
pub fn pod(name: &str, node: &str, app: &str) -> Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app, "tier": "front"}},
        "spec": {"containers": [{"name": "main", "image": "registry.invalid/app:1.0"}]}
    });
    if node.is_empty() {
        pod["spec"]["schedulerName"] = json!("no-scheduler");
    } else {
        pod["spec"]["nodeName"] = json!(node);
    }
    pod
}

/// A Running, Ready status, as a kubelet writes it (fixed values: the same on both sides).
pub fn running_status() -> Value {
    let now = "2026-01-01T00:00:00Z";
    let condition = |kind: &str| json!({"type": kind, "status": "True", "lastProbeTime": null, "lastTransitionTime": now});
    json!({"status": {
        "phase": "Running",
        "conditions": [condition("Initialized"), condition("Ready"), condition("ContainersReady"), condition("PodScheduled")],
        "hostIP": "10.0.0.1", "podIP": "10.1.0.1", "startTime": now,
        "containerStatuses": [{"name": "main", "ready": true, "restartCount": 0, "started": true,
                               "image": "registry.invalid/app:1.0", "imageID": "registry.invalid/app@sha256:0",
                               "state": {"running": {"startedAt": now}}}]
    }})
}

/// Creates running, ready pods `names` on both servers.
pub async fn running_pods(pair: &Pair, names: &[&str], app: &str) {
    for name in names {
        pair.seed(Req::post(
            "/api/v1/namespaces/{ns}/pods",
            pod(name, "node-x", app),
        ))
        .await;
        pair.seed(Req::patch(
            format!("/api/v1/namespaces/{{ns}}/pods/{name}/status"),
            super::harness::MERGE_PATCH,
            running_status(),
        ))
        .await;
    }
}

/// A PDB over `app` with `spec` (e.g. `{"minAvailable": 1}`).
pub fn pdb(name: &str, app: &str, mut spec: Value) -> Value {
    spec["selector"] = json!({"matchLabels": {"app": app}});
    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": name}, "spec": spec})
}

/// Creates the PDB on both and waits until both report its status for `pods` healthy pods.
pub async fn create_pdb(pair: &Pair, name: &str, app: &str, spec: Value, pods: i64) {
    pair.seed(Req::post(
        "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
        pdb(name, app, spec),
    ))
    .await;
    pair.until(
        "the budget's status",
        Req::get(format!(
            "/apis/policy/v1/namespaces/{{ns}}/poddisruptionbudgets/{name}"
        )),
        |reply| {
            reply.body["status"]["observedGeneration"] == 1
                && reply.body["status"]["currentHealthy"] == pods
        },
    )
    .await;
}

/// A NodeMaintenance for `node`.
pub fn maintenance(name: &str, node: &str) -> Value {
    json!({"apiVersion": "nodemaintenance.medik8s.io/v1beta1", "kind": "NodeMaintenance",
           "metadata": {"name": name}, "spec": {"nodeName": node, "reason": "fidelity"}})
}

pub const NODEMAINTENANCES: &str = "/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances";

/// A Lease held by `holder`.
pub fn lease(name: &str, holder: &str) -> Value {
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
           "metadata": {"name": name},
           "spec": {"holderIdentity": holder, "leaseDurationSeconds": 3600,
                    "acquireTime": "2026-01-01T00:00:00.000000Z",
                    "renewTime": "2026-01-01T00:00:00.000000Z", "leaseTransitions": 0}})
}

/// A Node as a kubelet would register it (minimal), then without the taint the real server's
/// admission adds to every new node (a known difference, see the `nodes` case): both servers
/// then hold the same node.
pub async fn node(pair: &Pair, name: &str) {
    // Now: the real node lifecycle controller would otherwise find the node silent already.
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    pair.seed(Req::post(
        "/api/v1/nodes",
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
               "status": {"conditions": [{"type": "Ready", "status": "True",
                                          "lastHeartbeatTime": now,
                                          "lastTransitionTime": now,
                                          "reason": "KubeletReady", "message": "ready"}]}}),
    ))
    .await;
    pair.seed(Req::patch(
        format!("/api/v1/nodes/{name}"),
        super::harness::MERGE_PATCH,
        json!({"spec": {"taints": null}}),
    ))
    .await;
}
