//! The floor of a scenario on the real API server: the least work any operator must do to
//! drain its nodes, done with no operator at all. Every maintained node is cordoned and every
//! pod a drain must remove is evicted (finished pods deleted), with at most
//! [`CONCURRENCY`] requests in flight and no client-side rate limit (kube's client has none),
//! timed from the first request until the last of those pods is seen gone: as nmo's run is
//! timed from the first NodeMaintenance created until the last is seen Succeeded. It skips
//! what nmo skips (mirror pods, pods of a DaemonSet) and writes no status, no lease, no label
//! and no taint.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, EvictParams, Patch, PatchParams};
use kube::runtime::watcher;
use tokio::sync::{Semaphore, mpsc};

use super::error::BenchError;

/// Requests the floor keeps in flight at most.
pub const CONCURRENCY: usize = 32;
/// How long a refused eviction (a budget's 429) waits before it is tried again.
const RETRY_AFTER_REFUSAL: Duration = Duration::from_millis(200);
/// How long one request may take.
const CALL_DEADLINE: Duration = Duration::from_secs(30);
/// Tries of one request that fails otherwise than by a refusal.
const ATTEMPTS: u32 = 5;

/// What the floor did.
#[derive(Debug, Clone)]
pub struct FloorRun {
    /// From the first request to the last pod seen gone.
    pub wall: Duration,
    /// Per node, from the first request to the node empty (of the pods a drain removes).
    pub drained: Vec<Duration>,
    /// Pods evicted or deleted.
    pub removed: u64,
    /// Evictions refused with 429.
    pub too_many_requests: u64,
}

/// What a drain does with a pod on a maintained node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Removal {
    Evict,
    Delete,
    /// Already terminating: only waited for.
    Wait,
    Keep,
}

/// nmo's rules (nmo-actors' `decisions::pods::classify`), the DaemonSets taken to exist.
fn removal(pod: &Pod) -> Removal {
    let meta = &pod.metadata;
    let mirror = meta
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    let daemonset = meta
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "DaemonSet");
    if mirror || daemonset {
        return Removal::Keep;
    }
    if meta.deletion_timestamp.is_some() {
        return Removal::Wait;
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        Removal::Delete
    } else {
        Removal::Evict
    }
}

/// A pod to remove: (namespace, name, how).
type Work = (String, String, Removal);

/// The pods on `nodes` a drain must see gone, by uid, with their node; and the work per node.
fn plan(pods: &[Pod], nodes: &[String]) -> (BTreeMap<String, String>, BTreeMap<String, Vec<Work>>) {
    let mut pending = BTreeMap::new();
    let mut work: BTreeMap<String, Vec<Work>> =
        nodes.iter().map(|n| (n.clone(), Vec::new())).collect();
    for pod in pods {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_ref()) else {
            continue;
        };
        let (Some(list), Some(uid)) = (work.get_mut(node), pod.metadata.uid.as_ref()) else {
            continue;
        };
        let how = removal(pod);
        if how == Removal::Keep {
            continue;
        }
        pending.insert(uid.clone(), node.clone());
        if how != Removal::Wait {
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            list.push((ns, name, how));
        }
    }
    (pending, work)
}

/// The floor's watch on pods, opened and listed, and its plan made from that list.
pub struct Prepared {
    events: futures::stream::BoxStream<'static, Result<watcher::Event<Pod>, watcher::Error>>,
    nodes: Vec<String>,
    pending: BTreeMap<String, String>,
    work: BTreeMap<String, Vec<Work>>,
}

/// Opens the floor's watch on the pods of the cluster behind `client` and plans the drain of
/// `nodes` from its first list (so that no deletion slips between the plan and the watch).
/// Done before the clock starts, as nmo's start-up is.
pub async fn prepare(client: &kube::Client, nodes: &[String]) -> Result<Prepared, BenchError> {
    let pods: Api<Pod> = Api::all(client.clone());
    let mut events = watcher(pods, watcher::Config::default()).boxed();
    let mut listed = Vec::new();
    loop {
        match next_event(&mut events, CALL_DEADLINE).await? {
            watcher::Event::InitApply(pod) => listed.push(pod),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    let (pending, work) = plan(&listed, nodes);
    Ok(Prepared {
        events,
        nodes: nodes.to_vec(),
        pending,
        work,
    })
}

/// Drains the nodes `prepared` planned for (see the module's comment) through `client`; gives
/// up after `timeout`.
pub async fn drain(
    prepared: Prepared,
    client: &kube::Client,
    timeout: Duration,
) -> Result<FloorRun, BenchError> {
    // Over 80 lines: the floor's drain as one loop that the spawned node drains report into; the
    // loop's bookkeeping (cordoned, drained, refused, relisted) is shared by every step of it.
    let Prepared {
        mut events,
        nodes,
        mut pending,
        work,
    } = prepared;
    let removed = work.values().map(|w| w.len() as u64).sum();
    let mut left: BTreeMap<String, usize> = nodes.iter().map(|n| (n.clone(), 0)).collect();
    for node in pending.values() {
        *left.entry(node.clone()).or_insert(0) += 1;
    }

    let started = Instant::now();
    let (cordoned_tx, mut cordoned_rx) = mpsc::unbounded_channel::<String>();
    let permits = Arc::new(Semaphore::new(CONCURRENCY));
    let mut tasks = tokio::task::JoinSet::new();
    for (node, pods) in work {
        let (client, permits, cordoned) = (client.clone(), permits.clone(), cordoned_tx.clone());
        tasks.spawn(async move { drain_node(client, permits, node, pods, cordoned).await });
    }
    drop(cordoned_tx);

    let mut cordoned = BTreeSet::new();
    let mut drained: BTreeMap<String, Duration> = BTreeMap::new();
    let mut refused = 0u64;
    let mut relisted: Option<BTreeSet<String>> = None;
    let deadline = tokio::time::Instant::now() + timeout;
    while drained.len() < nodes.len() {
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => {
                return Err(BenchError::Real(format!(
                    "the floor drained {} of {} nodes in {timeout:?}", drained.len(), nodes.len()
                )));
            }
            Some(node) = cordoned_rx.recv() => { cordoned.insert(node); }
            Some(done) = tasks.join_next() => {
                refused += done.map_err(|e| BenchError::Real(e.to_string()))??;
            }
            event = next_event(&mut events, timeout) => match event? {
                watcher::Event::Delete(pod) => {
                    gone(&mut pending, &mut left, pod.metadata.uid.as_deref());
                }
                // The watch was listed again: what the new list lacks is gone.
                watcher::Event::Init => relisted = Some(BTreeSet::new()),
                watcher::Event::InitApply(pod) => {
                    if let (Some(seen), Some(uid)) = (relisted.as_mut(), pod.metadata.uid) {
                        seen.insert(uid);
                    }
                }
                watcher::Event::InitDone => {
                    let seen = relisted.take().unwrap_or_default();
                    let lost: Vec<String> =
                        pending.keys().filter(|uid| !seen.contains(*uid)).cloned().collect();
                    for uid in lost {
                        gone(&mut pending, &mut left, Some(&uid));
                    }
                }
                watcher::Event::Apply(_) => {}
            },
        }
        let now = started.elapsed();
        for node in &cordoned {
            if left.get(node).copied().unwrap_or(0) == 0 {
                drained.entry(node.clone()).or_insert(now);
            }
        }
    }
    let wall = started.elapsed();
    while let Some(done) = tasks.join_next().await {
        refused += done.map_err(|e| BenchError::Real(e.to_string()))??;
    }
    Ok(FloorRun {
        wall,
        drained: drained.into_values().collect(),
        removed,
        too_many_requests: refused,
    })
}

/// One pod gone: one fewer left on its node.
fn gone(
    pending: &mut BTreeMap<String, String>,
    left: &mut BTreeMap<String, usize>,
    uid: Option<&str>,
) {
    if let Some(node) = uid.and_then(|uid| pending.remove(uid))
        && let Some(n) = left.get_mut(&node)
    {
        *n = n.saturating_sub(1);
    }
}

async fn next_event<S>(events: &mut S, within: Duration) -> Result<watcher::Event<Pod>, BenchError>
where
    S: futures::Stream<Item = Result<watcher::Event<Pod>, watcher::Error>> + Unpin,
{
    loop {
        match tokio::time::timeout(within, events.next()).await {
            Err(_) => return Err(BenchError::Real(format!("no pod event in {within:?}"))),
            Ok(None) => return Err(BenchError::Real("the pod watch ended".into())),
            Ok(Some(Ok(event))) => return Ok(event),
            // The watcher lists and watches again by itself; its errors are transient.
            Ok(Some(Err(e))) => {
                tracing::debug!(error = %e, "floor: pod watch");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Cordons `node` and removes its `pods`, each request holding a permit; returns the
/// evictions refused with 429.
async fn drain_node(
    client: kube::Client,
    permits: Arc<Semaphore>,
    node: String,
    pods: Vec<Work>,
    cordoned: mpsc::UnboundedSender<String>,
) -> Result<u64, BenchError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let cordon = Patch::Merge(serde_json::json!({"spec": {"unschedulable": true}}));
    let params = PatchParams::default();
    let (api, name, patch, params) = (&nodes, &node, &cordon, &params);
    with_retries(&permits, &format!("cordon {node}"), move || {
        api.patch(name, params, patch)
    })
    .await?;
    let _ = cordoned.send(node);
    let removals = pods.into_iter().map(|(ns, name, how)| {
        let (client, permits) = (client.clone(), permits.clone());
        async move {
            let api: Api<Pod> = Api::namespaced(client, &ns);
            let what = format!("remove {ns}/{name}");
            match how {
                Removal::Delete => with_retries(&permits, &what, || {
                    let (api, name) = (&api, &name);
                    async move { api.delete(name, &DeleteParams::default()).await.map(|_| ()) }
                })
                .await
                .map(|()| 0),
                _ => evict(&api, &permits, &name, &what).await,
            }
        }
    });
    let refused: Vec<Result<u64, BenchError>> = futures::future::join_all(removals).await;
    refused.into_iter().sum()
}

/// Evicts `name` until the API server takes it (a refused eviction is tried again); returns
/// how many times it was refused.
async fn evict(
    api: &Api<Pod>,
    permits: &Semaphore,
    name: &str,
    what: &str,
) -> Result<u64, BenchError> {
    let mut refused = 0;
    loop {
        let outcome = with_retries(permits, what, move || async move {
            match api.evict(name, &EvictParams::default()).await {
                Err(kube::Error::Api(status)) if status.code == 429 => Ok(false),
                // Gone already: as good as evicted.
                Err(kube::Error::Api(status)) if status.code == 404 => Ok(true),
                other => other.map(|_| true),
            }
        })
        .await?;
        if outcome {
            return Ok(refused);
        }
        refused += 1;
        tokio::time::sleep(RETRY_AFTER_REFUSAL).await;
    }
}

/// Runs `call` holding a permit, with a deadline, trying again on failure; a 404 (the object
/// is already gone) counts as done.
async fn with_retries<T, F, Fut>(
    permits: &Semaphore,
    what: &str,
    mut call: F,
) -> Result<T, BenchError>
where
    T: Default,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        let outcome = {
            let _permit = permits
                .acquire()
                .await
                .map_err(|e| BenchError::Real(e.to_string()))?;
            tokio::time::timeout(CALL_DEADLINE, call()).await
        };
        let error = match outcome {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(kube::Error::Api(status))) if status.code == 404 => return Ok(T::default()),
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer in {CALL_DEADLINE:?}"),
        };
        if attempt >= ATTEMPTS {
            return Err(BenchError::Real(format!("floor: {what}: {error}")));
        }
        tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: &str, extra: serde_json::Value) -> Pod {
        let mut object = serde_json::json!({
            "metadata": {"name": name, "namespace": "w", "uid": format!("uid-{name}")},
            "spec": {"nodeName": node, "containers": []},
            "status": {"phase": "Running"},
        });
        merge(&mut object, extra);
        serde_json::from_value(object).expect("a pod")
    }

    fn merge(into: &mut serde_json::Value, from: serde_json::Value) {
        match (into, from) {
            (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (slot, value) => *slot = value,
        }
    }

    #[test]
    fn the_floor_removes_what_nmo_removes_and_keeps_what_it_keeps() {
        let nodes = vec!["n1".to_string(), "n2".to_string()];
        let pods = [
            pod("web", "n1", serde_json::json!({})),
            pod(
                "done",
                "n1",
                serde_json::json!({"status": {"phase": "Succeeded"}}),
            ),
            pod(
                "static",
                "n1",
                serde_json::json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}),
            ),
            pod(
                "agent",
                "n2",
                serde_json::json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1",
                    "kind": "DaemonSet", "name": "ds", "uid": "d", "controller": true}]}}),
            ),
            pod(
                "leaving",
                "n2",
                serde_json::json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
            ),
            pod("elsewhere", "n3", serde_json::json!({})),
        ];
        let (pending, work) = plan(&pods, &nodes);
        let pending: Vec<(&str, &str)> = pending
            .iter()
            .map(|(u, n)| (u.as_str(), n.as_str()))
            .collect();
        assert_eq!(
            pending,
            [("uid-done", "n1"), ("uid-leaving", "n2"), ("uid-web", "n1")]
        );
        let hows: Vec<(&str, Removal)> = work["n1"]
            .iter()
            .map(|(_, n, h)| (n.as_str(), *h))
            .collect();
        assert_eq!(hows, [("web", Removal::Evict), ("done", Removal::Delete)]);
        assert!(
            work["n2"].is_empty(),
            "a terminating pod is only waited for"
        );
    }

    #[test]
    fn a_pod_gone_counts_once_on_its_own_node() {
        let mut pending: BTreeMap<String, String> =
            [("a".into(), "n1".into()), ("b".into(), "n1".into())].into();
        let mut left: BTreeMap<String, usize> = [("n1".into(), 2)].into();
        gone(&mut pending, &mut left, Some("a"));
        gone(&mut pending, &mut left, Some("a"));
        gone(&mut pending, &mut left, Some("unknown"));
        assert_eq!(left["n1"], 1);
        gone(&mut pending, &mut left, Some("b"));
        assert_eq!(left["n1"], 0);
    }
}
