//! The kubelet stand-in for any API server, through a kube client: a real kube-apiserver has no
//! kubelet (pods stay Pending, terminating pods never go), so this plays it for a set of nodes,
//! with the same decisions as the simulator's own kubelet ([`super::rules`]) at a configurable
//! speed ([`Timing`]).
//!
//! It watches every pod (one watch, filtered here by node: a few thousand pods are cheap) and
//! for a pod bound to one of its nodes: starts it by writing a Running, Ready status through the
//! `status` subresource, as a JSON patch whose `test` ops make it a no-op unless the pod is still
//! the same Pending pod; finishes a deleted pod after its grace period by deleting it with grace
//! period 0 and its uid as precondition, as a kubelet does. Every call has a deadline and is
//! retried with backoff on a transient failure; each write is safe to repeat.
//!
//! It needs rights a kubelet has on pods and `pods/status` (and `get` on nodes, for a pod's
//! host IP): give it an admin client on a server without the Node authorizer.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::task::{AbortHandle, JoinHandle};

use super::rules::{self, Decision, FINISH_GRACE_SECONDS, PodFacts, Timing, Underway};

/// The deadline of one API call.
const CALL_DEADLINE: Duration = Duration::from_secs(10);
/// The first wait before a failed call is tried again (doubled each time, up to [`MAX_BACKOFF`]).
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait between two tries.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// Tries of one start or finish before it is left to the next event about the pod.
const ATTEMPTS: u32 = 8;

/// The nodes a [`RemoteKubelet`] serves: all, or a set that can grow while it runs.
#[derive(Clone, Debug, Default)]
pub struct NodeSet(Arc<Mutex<Option<BTreeSet<String>>>>);

impl NodeSet {
    /// Every node of the cluster.
    pub fn all() -> NodeSet {
        NodeSet::default()
    }

    /// Only these nodes (more can be added).
    pub fn only<I: IntoIterator<Item = S>, S: Into<String>>(nodes: I) -> NodeSet {
        NodeSet(Arc::new(Mutex::new(Some(
            nodes.into_iter().map(Into::into).collect(),
        ))))
    }

    fn lock(&self) -> MutexGuard<'_, Option<BTreeSet<String>>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Serves `node` too (no effect when serving every node). Pods already bound to it are
    /// picked up at their next event.
    pub fn add(&self, node: &str) {
        if let Some(nodes) = self.lock().as_mut() {
            nodes.insert(node.to_string());
        }
    }

    /// Whether `node` is served.
    pub fn contains(&self, node: &str) -> bool {
        self.lock()
            .as_ref()
            .is_none_or(|nodes| nodes.contains(node))
    }
}

/// A kubelet stand-in running as a task; stopped (with every timer it set) when dropped.
pub struct RemoteKubelet {
    nodes: NodeSet,
    task: JoinHandle<()>,
}

impl RemoteKubelet {
    /// Starts playing the kubelet of `nodes` on the calling runtime, with `client`.
    pub fn spawn(client: Client, timing: Timing, nodes: NodeSet) -> RemoteKubelet {
        let task = tokio::spawn(run(client, timing, nodes.clone(), std::future::pending()));
        RemoteKubelet { nodes, task }
    }

    /// The nodes it serves.
    pub fn nodes(&self) -> &NodeSet {
        &self.nodes
    }

    /// Stops it and every start or finish it had scheduled.
    pub fn stop(self) {
        // Drop does it.
    }
}

impl Drop for RemoteKubelet {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A pod's name and what is under way for it.
struct Tracked {
    namespace: String,
    name: String,
    starting: Option<AbortHandle>,
    finishing: Option<(i64, AbortHandle)>,
}

impl Tracked {
    fn underway(&self) -> Underway {
        Underway {
            starting: self.starting.as_ref().is_some_and(|h| !h.is_finished()),
            finishing_after_grace: self
                .finishing
                .as_ref()
                .filter(|(_, h)| !h.is_finished())
                .map(|(grace, _)| *grace),
        }
    }

    fn cancel_all(&mut self) {
        if let Some(h) = self.starting.take() {
            h.abort();
        }
        if let Some((_, h)) = self.finishing.take() {
            h.abort();
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.cancel_all();
    }
}

/// The kubelet's state: pods by uid, and the node addresses it has looked up.
struct Kubelet {
    client: Client,
    timing: Timing,
    nodes: NodeSet,
    pods: HashMap<String, Tracked>,
    node_ips: Arc<Mutex<HashMap<String, String>>>,
}

impl Kubelet {
    fn observe(&mut self, pod: &Pod) {
        let Ok(value) = serde_json::to_value(pod) else {
            return;
        };
        let facts = PodFacts::of(&value);
        if facts.uid.is_empty() || !facts.bound() || !self.nodes.contains(&facts.node) {
            return;
        }
        let tracked = self
            .pods
            .entry(facts.uid.clone())
            .or_insert_with(|| Tracked {
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                name: pod.metadata.name.clone().unwrap_or_default(),
                starting: None,
                finishing: None,
            });
        match rules::decide(Some(&facts), tracked.underway(), &self.timing) {
            Decision::Nothing => {}
            Decision::CancelAll => tracked.cancel_all(),
            Decision::ForgetStart => tracked.starting = None,
            Decision::Start { after } => {
                let start = start_pod(
                    self.client.clone(),
                    self.node_ips.clone(),
                    tracked.namespace.clone(),
                    tracked.name.clone(),
                    facts,
                    value,
                );
                tracked.starting = Some(
                    tokio::spawn(async move {
                        tokio::time::sleep(after).await;
                        start.await;
                    })
                    .abort_handle(),
                );
            }
            Decision::Finish {
                grace_seconds,
                after,
            } => {
                // A pod being deleted is never started.
                tracked.cancel_all();
                let finish = finish_pod(
                    self.client.clone(),
                    tracked.namespace.clone(),
                    tracked.name.clone(),
                    facts.uid,
                );
                let handle = tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    finish.await;
                })
                .abort_handle();
                tracked.finishing = Some((grace_seconds, handle));
            }
        }
    }

    fn gone(&mut self, uid: &str) {
        // Dropping the entry cancels its timers.
        self.pods.remove(uid);
    }

    /// Forgets the pods a relist did not find: deleted while the watch was down.
    fn forget_unlisted(&mut self, relisted: &BTreeSet<String>) {
        let gone: Vec<String> = self
            .pods
            .keys()
            .filter(|uid| !relisted.contains(*uid))
            .cloned()
            .collect();
        for uid in gone {
            self.gone(&uid);
        }
    }

    /// Stops tracking the pods with nothing left to do (neither starting nor finishing after a
    /// grace period).
    fn drop_settled(&mut self) {
        self.pods.retain(|_, tracked| {
            let underway = tracked.underway();
            underway.starting || underway.finishing_after_grace.is_some()
        });
    }
}

/// Plays the kubelet of `nodes` until `shutdown` completes.
pub async fn run(
    client: Client,
    timing: Timing,
    nodes: NodeSet,
    shutdown: impl Future<Output = ()>,
) {
    let api: Api<Pod> = Api::all(client.clone());
    let mut stream = watch(api, watcher::Config::default())
        .backoff(WatchBackoff::default())
        .boxed();
    let mut kubelet = Kubelet {
        client,
        timing,
        nodes,
        pods: HashMap::new(),
        node_ips: Arc::default(),
    };
    let mut relisted: BTreeSet<String> = BTreeSet::new();
    tokio::pin!(shutdown);
    loop {
        let event = tokio::select! {
            () = &mut shutdown => break,
            event = stream.next() => event,
        };
        match event {
            None => break,
            Some(Ok(Event::Init)) => relisted.clear(),
            Some(Ok(Event::InitApply(pod))) => {
                if let Some(uid) = &pod.metadata.uid {
                    relisted.insert(uid.clone());
                }
                kubelet.observe(&pod);
            }
            Some(Ok(Event::InitDone)) => kubelet.forget_unlisted(&relisted),
            Some(Ok(Event::Apply(pod))) => kubelet.observe(&pod),
            Some(Ok(Event::Delete(pod))) => {
                if let Some(uid) = &pod.metadata.uid {
                    kubelet.gone(uid);
                }
            }
            Some(Err(error)) => {
                tracing::warn!(%error, "the kubelet stand-in's pod watch failed; retrying with backoff");
            }
        }
        kubelet.drop_settled();
    }
}

/// The pod watch's wait after an error: from [`FIRST_BACKOFF`], doubled up to [`MAX_BACKOFF`],
/// back to the start once an event arrives. kube-runtime's default grows to 30 s and so
/// outlasts an API server restart by as much: the pods nmo evicted meanwhile would stay
/// Terminating long after the server is back.
#[derive(Debug, Clone, Copy)]
struct WatchBackoff {
    next: Duration,
}

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff {
            next: FIRST_BACKOFF,
        }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let wait = self.next;
        self.next = (wait * 2).min(MAX_BACKOFF);
        Some(wait)
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        *self = WatchBackoff::default();
    }
}

/// How a call ended, for the retry loop.
enum Outcome {
    /// Done, or nothing left to do (the pod changed or is gone).
    Settled,
    /// A transient failure: try again.
    Retry(String),
}

fn classify<T>(
    what: &str,
    result: Result<Result<T, kube::Error>, tokio::time::error::Elapsed>,
) -> Outcome {
    match result {
        Ok(Ok(_)) => Outcome::Settled,
        // 404: gone; 409: a precondition (uid) failed; 422: a `test` op failed (no longer the
        // same Pending pod). Nothing to do in each case.
        Ok(Err(kube::Error::Api(status))) if [404, 409, 422].contains(&status.code) => {
            Outcome::Settled
        }
        Ok(Err(error)) => Outcome::Retry(format!("{what}: {error}")),
        Err(_) => Outcome::Retry(format!("{what}: no answer within {CALL_DEADLINE:?}")),
    }
}

/// Runs `call` until it settles, backing off between tries.
async fn with_retries<F, Fut>(mut call: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Outcome>,
{
    let mut backoff = FIRST_BACKOFF;
    for attempt in 1..=ATTEMPTS {
        match call().await {
            Outcome::Settled => return,
            Outcome::Retry(why) => {
                tracing::debug!(attempt, %why, "the kubelet stand-in retries");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
    tracing::warn!("the kubelet stand-in gave up on a pod after {ATTEMPTS} tries");
}

/// The node's InternalIP, looked up once per node.
async fn host_ip(
    client: &Client,
    cache: &Mutex<HashMap<String, String>>,
    node: &str,
) -> Result<String, Outcome> {
    if let Some(ip) = lock(cache).get(node) {
        return Ok(ip.clone());
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let found = tokio::time::timeout(CALL_DEADLINE, nodes.get(node)).await;
    match found {
        Ok(Ok(found)) => {
            let value = serde_json::to_value(&found).unwrap_or(Value::Null);
            let ip = rules::node_internal_ip(&value);
            lock(cache).insert(node.to_string(), ip.clone());
            Ok(ip)
        }
        other => Err(classify(&format!("reading node {node}"), other)),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Marks the pod Running and Ready, if it is still the same Pending pod.
async fn start_pod(
    client: Client,
    node_ips: Arc<Mutex<HashMap<String, String>>>,
    namespace: String,
    name: String,
    facts: PodFacts,
    pod: Value,
) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    with_retries(|| async {
        let host = match host_ip(&client, &node_ips, &facts.node).await {
            Ok(host) => host,
            Err(outcome) => return outcome,
        };
        let status = rules::started_status(&pod, &host, &rules::pod_ip(), &now());
        let patch = start_patch(&facts.uid, &status);
        let result = tokio::time::timeout(
            CALL_DEADLINE,
            pods.patch_status(&name, &PatchParams::default(), &Patch::Json::<()>(patch)),
        )
        .await;
        classify(&format!("starting pod {namespace}/{name}"), result)
    })
    .await;
}

/// The JSON patch that starts a pod: a no-op (422) unless it is still pod `uid` and Pending;
/// each status field is added (so replaced), leaving those the kubelet does not write.
fn start_patch(uid: &str, status: &Value) -> json_patch::Patch {
    let mut ops = vec![
        json!({"op": "test", "path": "/metadata/uid", "value": uid}),
        json!({"op": "test", "path": "/status/phase", "value": "Pending"}),
    ];
    if let Some(fields) = status.as_object() {
        for (key, value) in fields {
            ops.push(json!({"op": "add", "path": format!("/status/{key}"), "value": value}));
        }
    }
    serde_json::from_value(Value::Array(ops)).unwrap_or_else(|_| json_patch::Patch(Vec::new()))
}

/// Deletes the stopped pod with grace period 0, if it is still pod `uid`.
async fn finish_pod(client: Client, namespace: String, name: String, uid: String) {
    let pods: Api<Pod> = Api::namespaced(client, &namespace);
    let params = DeleteParams {
        grace_period_seconds: u32::try_from(FINISH_GRACE_SECONDS).ok(),
        preconditions: Some(Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    with_retries(|| async {
        let result = tokio::time::timeout(CALL_DEADLINE, pods.delete(&name, &params)).await;
        classify(&format!("finishing pod {namespace}/{name}"), result)
    })
    .await;
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_patch_tests_the_pod_then_adds_each_status_field() {
        let patch = serde_json::to_value(start_patch(
            "u1",
            &json!({"phase": "Running", "podIP": "10.0.0.9"}),
        ))
        .unwrap();
        assert_eq!(
            patch,
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u1"},
                {"op": "test", "path": "/status/phase", "value": "Pending"},
                {"op": "add", "path": "/status/phase", "value": "Running"},
                {"op": "add", "path": "/status/podIP", "value": "10.0.0.9"}
            ])
        );
    }

    #[test]
    fn a_node_set_serves_every_node_or_the_named_ones() {
        assert!(NodeSet::all().contains("anything"));
        let some = NodeSet::only(["a"]);
        assert!(some.contains("a") && !some.contains("b"));
        some.add("b");
        assert!(some.contains("b"));
    }
}
