//! Objects the cases create, the same on both servers.

use nmo_envtest::unique_name;
use serde_json::{Value, json};

use super::harness::{Compare, MERGE_PATCH, Pair, Reply, Req, Side};

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
        pair.seed(Req::post(PODS, pod(name, "node-x", app))).await;
        pair.seed(Req::patch(
            format!("{}/status", pod_at(name)),
            MERGE_PATCH,
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
        MERGE_PATCH,
        json!({"spec": {"taints": null}}),
    ))
    .await;
}

/// The case's pods.
pub const PODS: &str = "/api/v1/namespaces/{ns}/pods";

/// The path of the case's pod `name`.
pub fn pod_at(name: &str) -> String {
    format!("{PODS}/{name}")
}

/// The path of the NodeMaintenance `name`.
pub fn maintenance_at(name: &str) -> String {
    format!("{NODEMAINTENANCES}/{name}")
}

/// A pair whose namespace holds the pod web-0 (app=web, on node-x).
pub async fn with_pod() -> Pair {
    let pair = Pair::start().await;
    pair.seed(Req::post(PODS, pod("web-0", "node-x", "web")))
        .await;
    pair
}

/// A pair with a NodeMaintenance (for node-x) on both servers, and its name.
pub async fn with_maintenance() -> (Pair, String) {
    let pair = Pair::start().await;
    let name = pair.unique("nm");
    pair.seed(Req::post(NODEMAINTENANCES, maintenance(&name, "node-x")))
        .await;
    (pair, name)
}

/// POSTs to both a NodeMaintenance (for node-x) changed by `edit`, and compares the answers.
pub async fn post_maintenance(what: &str, edit: impl FnOnce(&mut Value)) -> Compare {
    let mut object = maintenance(&unique_name("nm"), "node-x");
    edit(&mut object);
    fresh(what, Req::post(NODEMAINTENANCES, object)).await
}

/// Sends `req` to both servers of a fresh pair, and compares the answers.
pub async fn fresh(what: &str, req: Req) -> Compare {
    Pair::start().await.compare(what, req).await
}

/// POSTs to both a pod (web-0, app=web, on node-x) changed by `edit`, and compares the answers.
pub async fn post_pod(what: &str, edit: impl FnOnce(&mut Value)) -> Compare {
    let mut object = pod("web-0", "node-x", "web");
    edit(&mut object);
    fresh(what, Req::post(PODS, object)).await
}

/// For `Pair::each`: a PUT to `path` of what each server answered in `earlier` (with that
/// server's own uid and resourceVersion), changed by `edit`.
pub fn updated(
    earlier: &(Reply, Reply),
    path: &str,
    edit: impl Fn(&mut Value),
) -> impl Fn(Side) -> Req {
    move |side| {
        let mut body = side.of(earlier).body.clone();
        edit(&mut body);
        Req::put(path, body)
    }
}
