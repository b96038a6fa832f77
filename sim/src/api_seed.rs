//! Seeding a [`Scenario`] through the API of a real kube-apiserver, where its controllers
//! (ReplicaSet, DaemonSet, disruption, garbage collector), its scheduler and a kubelet (e.g.
//! [`crate::kubelet::remote`]) do what the simulator's do: the same workloads as
//! [`crate::scenario::apply`] puts in the simulator's store, made the way a real cluster makes
//! them.
//!
//! - The scenario's nodes must exist (registered by the caller, labelled with
//!   [`Scenario::node_labels`], served by a kubelet).
//! - Pods that must sit on a given node (the spread ReplicaSets' pods, one emptyDir pod, one
//!   unmanaged pod, one finished pod per node) are created bound to it, without an owner; once
//!   they run, their ReplicaSets are created with as many replicas and adopt them (the
//!   ReplicaSet controller claims orphans that match its selector), so each node has exactly
//!   its share, as in the simulator. Mirror pods are created owned by their Node.
//! - DaemonSets are created and their controller makes one pod per scenario node (their
//!   templates select the scenario's nodes), which the scheduler binds.
//! - PDBs are created last, and seeding waits until their status is computed (the Eviction
//!   API refuses every eviction under a PDB whose status is not), until every ReplicaSet
//!   and DaemonSet counts its pods ready, and until every pod runs (the finished ones:
//!   Succeeded).
//!
//! The simulator neither adopts orphans nor makes DaemonSet pods, so this is not for it: seed
//! the simulator with [`crate::SimConfig::scenario`].

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::scenario::{
    self, CACHE_HASH, CACHE_REPLICASET, Scenario, ScenarioReport, Suffixes, pod_spec, running_pod,
    spread_replicaset,
};

/// The deadline of one API call.
const CALL_DEADLINE: Duration = Duration::from_secs(15);
/// How often the settling checks look again.
const POLL: Duration = Duration::from_millis(250);
/// Creations in flight at once.
const PARALLEL_CREATES: usize = 16;

/// Why a scenario could not be seeded.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    /// A request failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The client's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// A request got no answer in time.
    #[error("{what}: no answer within {CALL_DEADLINE:?}")]
    Deadline {
        /// What was being done.
        what: String,
    },
    /// The cluster did not settle in time.
    #[error("the scenario did not settle within {after:?}: {waiting_for}")]
    NotSettled {
        /// How long it waited.
        after: Duration,
        /// What it was still waiting for.
        waiting_for: String,
    },
    /// An object the seeding builds is not valid JSON for its kind (a bug here).
    #[error("building {what}: {source}")]
    Build {
        /// The object.
        what: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// `call` with a deadline, its failure described by `what`.
async fn within<T>(
    what: impl Into<String>,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, SeedError> {
    let what = what.into();
    match tokio::time::timeout(CALL_DEADLINE, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(source)) => Err(SeedError::Api {
            what,
            source: Box::new(source),
        }),
        Err(_) => Err(SeedError::Deadline { what }),
    }
}

fn is_conflict(error: &SeedError) -> bool {
    matches!(error, SeedError::Api { source, .. }
        if matches!(source.as_ref(), kube::Error::Api(status) if status.code == 409))
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn pods_resource() -> ApiResource {
    resource("", "v1", "Pod", "pods")
}

fn dynamic(object: &Value, what: &str) -> Result<DynamicObject, SeedError> {
    serde_json::from_value(object.clone()).map_err(|source| SeedError::Build {
        what: what.to_string(),
        source,
    })
}

/// Creates `object` (a repeat finds it there).
async fn create(
    client: &Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    object: &Value,
) -> Result<(), SeedError> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let what = format!("creating {} {name}", resource.kind);
    let api: Api<DynamicObject> = match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
        None => Api::all_with(client.clone(), resource),
    };
    let created = within(
        what.clone(),
        api.create(&PostParams::default(), &dynamic(object, &what)?),
    )
    .await;
    match created {
        Err(error) if is_conflict(&error) => Ok(()),
        other => other.map(|_| ()),
    }
}

/// A pod to create bound to its node, and whether it is the finished kind.
struct BoundPod {
    object: Value,
    finished: bool,
}

/// The pods that must sit on a given node, in the simulator's layout.
fn bound_pods(s: &Scenario, node_uids: &BTreeMap<String, String>) -> Vec<BoundPod> {
    let mut suffixes = Suffixes::starting_at(0);
    let mut pods = Vec::new();
    for (ni, node) in s.node_names().into_iter().enumerate() {
        pods.extend(pods_bound_to(
            s,
            ni,
            &node,
            node_uids.get(&node),
            &mut suffixes,
        ));
    }
    pods
}

/// The pods node `ni`, `node`, must have.
fn pods_bound_to(
    s: &Scenario,
    ni: usize,
    node: &str,
    node_uid: Option<&String>,
    suffixes: &mut Suffixes,
) -> Vec<BoundPod> {
    let workload_ns = s.workload_namespace.as_str();
    let bound = |name: String, labels: Value, spec: Value| BoundPod {
        object: unstarted_pod(&name, workload_ns, node, labels, None, spec),
        finished: false,
    };
    let mut pods = Vec::new();
    if s.mirror_pods {
        pods.push(BoundPod {
            object: mirror_pod(s, node, node_uid),
            finished: false,
        });
    }
    if s.emptydir_pods {
        pods.push(bound(
            format!("{CACHE_REPLICASET}-{}", suffixes.next()),
            json!({"app": "cache", "pod-template-hash": CACHE_HASH}),
            pod_spec("cache", true),
        ));
    }
    if s.unmanaged_pods {
        pods.push(bound(
            format!("standalone-{node}"),
            json!({"app": "standalone"}),
            pod_spec("standalone", false),
        ));
    }
    if s.finished_pods {
        let mut pod = bound(
            format!("batch-{node}"),
            json!({"app": "batch"}),
            pod_spec("batch", false),
        );
        pod.object["spec"]["restartPolicy"] = json!("Never");
        pod.finished = true;
        pods.push(pod);
    }
    let (_, spread, rs_count) = s.layout();
    for k in 0..spread {
        let (app, hash, name) = spread_replicaset((ni * spread + k) % rs_count);
        pods.push(bound(
            format!("{name}-{}", suffixes.next()),
            json!({"app": app, "pod-template-hash": hash}),
            pod_spec(&app, false),
        ));
    }
    pods
}

/// A static pod's mirror on `node`, owned by its Node.
fn mirror_pod(s: &Scenario, node: &str, node_uid: Option<&String>) -> Value {
    let owner = node_uid.map(|uid| {
        json!({"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid, "controller": true})
    });
    let mut pod = unstarted_pod(
        &format!("static-web-{node}"),
        &s.system_namespace,
        node,
        json!({"component": "static-web", "tier": "node"}),
        owner,
        pod_spec("static-web", false),
    );
    pod["metadata"]["annotations"] = json!({
        "kubernetes.io/config.hash": crate::kubelet::rand_hex(32),
        "kubernetes.io/config.mirror": crate::kubelet::rand_hex(32),
        "kubernetes.io/config.source": "file"
    });
    pod
}

/// A pod bound to `node`, without a status (its kubelet reports it).
fn unstarted_pod(
    name: &str,
    ns: &str,
    node: &str,
    labels: Value,
    owner: Option<Value>,
    spec: Value,
) -> Value {
    without_status(running_pod(name, ns, node, "", labels, owner, spec))
}

/// A pod without its status.
fn without_status(mut pod: Value) -> Value {
    if let Some(fields) = pod.as_object_mut() {
        fields.remove("status");
    }
    pod
}

/// What a finished pod's status says.
fn finished_status(pod: &Value) -> Value {
    let now = crate::rest::now_rfc3339();
    let mut status =
        crate::kubelet::rules::started_status(pod, "10.0.0.1", &crate::kubelet::pod_ip(), &now);
    scenario::completed(&mut status, &now);
    status
}

/// Seeds `s` through `client` (an admin) and waits, up to `settle`, for the cluster to settle.
pub async fn seed(
    client: &Client,
    s: &Scenario,
    settle: Duration,
) -> Result<ScenarioReport, SeedError> {
    let namespaces = resource("", "v1", "Namespace", "namespaces");
    for namespace in [&s.workload_namespace, &s.system_namespace] {
        let object =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        create(client, &namespaces, None, &object).await?;
    }
    let node_uids = node_uids(client, s).await?;
    let mut report = ScenarioReport {
        nodes: s.node_names(),
        ..ScenarioReport::default()
    };
    create_daemonsets(client, s, &mut report).await?;
    // The pods that must sit on their nodes, and once they run, their owners.
    let bound = bound_pods(s, &node_uids);
    report.pods = bound.len() + s.daemonsets * s.nodes;
    create_bound_pods(client, s, &bound).await?;
    let expected_bound = bound.len();
    wait_until(settle, "the bound pods to run", async || {
        let running = running_pods(client, s).await?;
        Ok(check(
            running >= expected_bound,
            format!("{running} of {expected_bound} pods running"),
        ))
    })
    .await?;
    create_replicasets(client, s, &mut report).await?;
    create_budgets(client, s).await?;
    wait_until(settle, "the scenario to settle", async || {
        settled(client, s, &report).await
    })
    .await?;
    Ok(report)
}

/// The uids of the scenario's nodes, by name.
async fn node_uids(client: &Client, s: &Scenario) -> Result<BTreeMap<String, String>, SeedError> {
    let nodes: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("", "v1", "Node", "nodes"));
    let mut node_uids = BTreeMap::new();
    for node in s.node_names() {
        let found = within(format!("reading node {node}"), nodes.get(&node)).await?;
        node_uids.insert(node, found.metadata.uid.unwrap_or_default());
    }
    Ok(node_uids)
}

async fn create_daemonsets(
    client: &Client,
    s: &Scenario,
    report: &mut ScenarioReport,
) -> Result<(), SeedError> {
    let daemonsets = resource("apps", "v1", "DaemonSet", "daemonsets");
    for d in 0..s.daemonsets {
        let name = format!("node-agent-{d}");
        create(
            client,
            &daemonsets,
            Some(&s.system_namespace),
            &scenario::daemonset(s, &name),
        )
        .await?;
        report.daemonsets.push((s.system_namespace.clone(), name));
    }
    Ok(())
}

/// Creates the bound pods, [`PARALLEL_CREATES`] at once, then finishes the finished ones.
async fn create_bound_pods(
    client: &Client,
    s: &Scenario,
    bound: &[BoundPod],
) -> Result<(), SeedError> {
    let pods = pods_resource();
    futures::stream::iter(bound.iter().map(|pod| {
        let namespace = pod.object["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let pods = &pods;
        async move { create(client, pods, Some(&namespace), &pod.object).await }
    }))
    .buffer_unordered(PARALLEL_CREATES)
    .try_collect::<Vec<()>>()
    .await?;
    for pod in bound.iter().filter(|pod| pod.finished) {
        let name = pod.object["metadata"]["name"].as_str().unwrap_or_default();
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &s.workload_namespace, &pods);
        let status = json!({"status": finished_status(&pod.object)});
        within(
            format!("finishing pod {name}"),
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)),
        )
        .await?;
    }
    Ok(())
}

/// The spread ReplicaSets and the emptyDir one, which adopt the bound pods (their budgets are
/// reported here, created once every ReplicaSet is).
async fn create_replicasets(
    client: &Client,
    s: &Scenario,
    report: &mut ScenarioReport,
) -> Result<(), SeedError> {
    let replicasets = resource("apps", "v1", "ReplicaSet", "replicasets");
    let (_, spread, rs_count) = s.layout();
    let total_spread = spread * s.nodes;
    for r in 0..rs_count {
        let (app, hash, name) = spread_replicaset(r);
        let replicas = total_spread / rs_count + usize::from(r < total_spread % rs_count);
        let object = scenario::replicaset(s, &name, &app, &hash, replicas, false);
        create(client, &replicasets, Some(&s.workload_namespace), &object).await?;
        report
            .replicasets
            .push((s.workload_namespace.clone(), name.clone()));
        if s.pdb.is_some() {
            // Created after every ReplicaSet, by `create_budgets`.
            report
                .pdbs
                .push((s.workload_namespace.clone(), format!("{app}-pdb")));
        }
    }
    if s.emptydir_pods && s.nodes > 0 {
        let object = scenario::replicaset(s, CACHE_REPLICASET, "cache", CACHE_HASH, s.nodes, true);
        create(client, &replicasets, Some(&s.workload_namespace), &object).await?;
        report
            .replicasets
            .push((s.workload_namespace.clone(), CACHE_REPLICASET.into()));
    }
    Ok(())
}

/// The budgets of the spread ReplicaSets, if the scenario has budgets.
async fn create_budgets(client: &Client, s: &Scenario) -> Result<(), SeedError> {
    let pdbs = resource(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
    );
    let (_, _, rs_count) = s.layout();
    for r in 0..rs_count {
        let (app, _, _) = spread_replicaset(r);
        if let Some(pdb) = scenario::pdb(s, &app) {
            create(client, &pdbs, Some(&s.workload_namespace), &pdb).await?;
        }
    }
    Ok(())
}

fn check(ok: bool, waiting_for: String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(waiting_for) }
}

/// Checks `check` every [`POLL`] until it is `Ok(Ok(()))`; an `Ok(Err(why))` is "not yet".
async fn wait_until(
    timeout: Duration,
    what: &str,
    mut check: impl AsyncFnMut() -> Result<Result<(), String>, SeedError>,
) -> Result<(), SeedError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let waiting_for = match check().await? {
            Ok(()) => return Ok(()),
            Err(why) => why,
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(SeedError::NotSettled {
                after: timeout,
                waiting_for: format!("{what}: {waiting_for}"),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn list(
    client: &Client,
    resource: &ApiResource,
    namespace: &str,
) -> Result<Vec<Value>, SeedError> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, resource);
    let listed = within(
        format!("listing {} in {namespace}", resource.plural),
        api.list(&ListParams::default()),
    )
    .await?;
    Ok(listed
        .items
        .iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect())
}

/// Pods of the scenario's namespaces that run (or, finished, have Succeeded), not terminating.
async fn running_pods(client: &Client, s: &Scenario) -> Result<usize, SeedError> {
    let mut running = 0;
    for namespace in [&s.workload_namespace, &s.system_namespace] {
        running += list(client, &pods_resource(), namespace)
            .await?
            .iter()
            .filter(|pod| pod["metadata"]["deletionTimestamp"].is_null())
            .filter(|pod| {
                matches!(
                    pod["status"]["phase"].as_str(),
                    Some("Running" | "Succeeded")
                )
            })
            .count();
    }
    Ok(running)
}

/// `Ok(())` once the owners count their pods ready, every pod runs and every PDB has its
/// status; else what is still awaited.
async fn settled(
    client: &Client,
    s: &Scenario,
    report: &ScenarioReport,
) -> Result<Result<(), String>, SeedError> {
    let mut waiting = unready_replicasets(client, s).await?;
    if s.daemonsets > 0 {
        waiting.extend(unready_daemonsets(client, s).await?);
    }
    if !report.pdbs.is_empty() {
        waiting.extend(uncomputed_budgets(client, s).await?);
    }
    let running = running_pods(client, s).await?;
    let mut pods = 0;
    for namespace in [&s.workload_namespace, &s.system_namespace] {
        pods += list(client, &pods_resource(), namespace).await?.len();
    }
    if running != report.pods || pods != report.pods {
        waiting.push(format!(
            "{running} pods running, {pods} in all, of {}",
            report.pods
        ));
    }
    Ok(if waiting.is_empty() {
        Ok(())
    } else {
        Err(waiting.join(", "))
    })
}

/// The controller of `object` has seen its latest generation.
fn generation_seen(object: &Value) -> bool {
    object["status"]["observedGeneration"].as_i64() >= object["metadata"]["generation"].as_i64()
}

/// The ReplicaSets without all their replicas ready.
async fn unready_replicasets(client: &Client, s: &Scenario) -> Result<Vec<String>, SeedError> {
    let replicasets = list(
        client,
        &resource("apps", "v1", "ReplicaSet", "replicasets"),
        &s.workload_namespace,
    )
    .await?;
    let mut waiting = Vec::new();
    for rs in &replicasets {
        let wanted = rs["spec"]["replicas"].as_i64().unwrap_or(0);
        let ready = rs["status"]["readyReplicas"].as_i64().unwrap_or(0);
        let replicas = rs["status"]["replicas"].as_i64().unwrap_or(0);
        if !generation_seen(rs) || ready != wanted || replicas != wanted {
            waiting.push(format!(
                "ReplicaSet {} ({ready} ready of {wanted})",
                rs["metadata"]["name"]
            ));
        }
    }
    Ok(waiting)
}

/// The DaemonSets without a ready pod on every scenario node.
async fn unready_daemonsets(client: &Client, s: &Scenario) -> Result<Vec<String>, SeedError> {
    let daemonsets = list(
        client,
        &resource("apps", "v1", "DaemonSet", "daemonsets"),
        &s.system_namespace,
    )
    .await?;
    let mut waiting = Vec::new();
    for ds in &daemonsets {
        let ready = ds["status"]["numberReady"].as_u64().unwrap_or(0);
        if !generation_seen(ds) || ready != s.nodes as u64 {
            waiting.push(format!(
                "DaemonSet {} ({ready} ready of {})",
                ds["metadata"]["name"], s.nodes
            ));
        }
    }
    Ok(waiting)
}

/// The budgets whose status the disruption controller has not computed yet.
async fn uncomputed_budgets(client: &Client, s: &Scenario) -> Result<Vec<String>, SeedError> {
    let pdbs = list(
        client,
        &resource(
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
        ),
        &s.workload_namespace,
    )
    .await?;
    Ok(pdbs
        .iter()
        .filter(|pdb| !generation_seen(pdb) || pdb["status"]["observedGeneration"].is_null())
        .map(|pdb| format!("the status of budget {}", pdb["metadata"]["name"]))
        .collect())
}
