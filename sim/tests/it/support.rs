//! Helpers shared by the simulator conformance tests.

use std::fmt::Debug;
use std::future::Future;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, EvictParams, Patch, PatchParams};
use kube::core::response::StatusSummary;
use nmo_sim::{Scenario, SimConfig, SimHandle, Simulator};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The NodeMaintenance CRD nmo ships (`nmo crd`'s output; a test of nmo fails when the file
/// drifts from the Rust type), so the simulator is tested with what nmo really installs. Read
/// from the file: the simulator does not depend on nmo.
pub const NM_CRD_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/base/crd.yaml");

/// The NodeMaintenance CRD as JSON.
pub fn nm_crd() -> Value {
    let text = std::fs::read_to_string(NM_CRD_PATH).expect("deploy/base/crd.yaml is readable");
    serde_yaml::from_str(&text).expect("deploy/base/crd.yaml is one YAML document")
}

/// Starts a simulator with the NodeMaintenance CRD, a scenario, and a fast clock.
pub async fn start(scenario: Option<Scenario>, time_scale: f64) -> SimHandle {
    let mut cfg = SimConfig::default()
        .crd_json(nm_crd())
        .time_scale(time_scale);
    cfg.scenario = scenario;
    cfg.timing.pod_startup = Duration::from_millis(500);
    cfg.bookmark_interval = Duration::from_millis(300);
    Simulator::start(cfg).await.expect("simulator starts")
}

/// Starts a simulator of `nodes` nodes with `pods` pods each (`Scenario::plain`), otherwise
/// as configured by default (no CRD, the real clock).
pub async fn start_plain(nodes: usize, pods: usize) -> SimHandle {
    Simulator::start(SimConfig::default().scenario(Scenario::plain(nodes, pods)))
        .await
        .expect("simulator starts")
}

/// kubectl against a simulator, with its own kubeconfig and discovery cache.
pub struct Kubectl {
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
}

/// The result of one kubectl run.
#[derive(Debug)]
pub struct Out {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Kubectl {
    /// None (with a notice) when kubectl is missing, unless CI=true (then it panics).
    pub fn new(sim: &SimHandle) -> Option<Kubectl> {
        let found = Command::new("kubectl")
            .arg("version")
            .arg("--client")
            .output()
            .is_ok();
        if !found {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("kubectl is required when CI=true");
            }
            eprintln!("NOTICE: kubectl not found, skipping kubectl checks");
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        Some(Kubectl { dir, kubeconfig })
    }

    /// Runs kubectl (blocking, in a blocking task).
    pub async fn run(&self, args: &[&str]) -> Out {
        let kc = self.kubeconfig.clone();
        let cache = self.dir.path().join("cache");
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        tokio::task::spawn_blocking(move || {
            let o = Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&kc)
                .arg("--cache-dir")
                .arg(&cache)
                .args(&args)
                .output()
                .expect("kubectl runs");
            Out {
                ok: o.status.success(),
                stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            }
        })
        .await
        .expect("join")
    }

    /// Runs kubectl with the words of `line` as its arguments (none has a space in it).
    pub async fn run_words(&self, line: &str) -> Out {
        self.run(&line.split_whitespace().collect::<Vec<_>>()).await
    }

    /// Writes a file into the temp dir.
    pub fn file(&self, name: &str, content: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, content).expect("write");
        p
    }
}

/// A raw request through the kube client: (status code, body as JSON or null).
pub async fn raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut b = http::Request::builder().method(method).uri(path);
    if let Some(ct) = content_type {
        b = b.header("content-type", ct);
    }
    let bytes = body
        .map(|v| serde_json::to_vec(&v).unwrap())
        .unwrap_or_default();
    let req = b.body(kube::client::Body::from(bytes)).unwrap();
    let resp = client.send(req).await.expect("request sent");
    let code = resp.status().as_u16();
    let data = resp.into_body().collect_bytes().await.expect("body");
    (code, serde_json::from_slice(&data).unwrap_or(Value::Null))
}

/// The Status of a kube API error.
pub fn status_of(e: kube::Error) -> Box<kube::core::Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// `raw` for a GET.
pub async fn raw_get(client: &kube::Client, path: &str) -> (u16, Value) {
    raw(client, "GET", path, None, None).await
}

/// The Status of the API error `request` fails with (it panics if `request` succeeds).
pub async fn refused<T: Debug>(
    request: impl Future<Output = kube::Result<T>>,
) -> Box<kube::core::Status> {
    status_of(request.await.unwrap_err())
}

/// Patches `name` through `api` with `patch` (a merge patch: `Patch::Merge`, a strategic one:
/// `Patch::Strategic`), expecting success.
pub async fn patched<K>(api: &Api<K>, name: &str, patch: Patch<Value>) -> K
where
    K: Clone + DeserializeOwned + Debug,
{
    api.patch(name, &PatchParams::default(), &patch)
        .await
        .expect("the patch is applied")
}

/// A merge patch of `name`'s labels through `api`, expecting success.
pub async fn relabelled<K>(api: &Api<K>, name: &str, labels: Value) -> K
where
    K: Clone + DeserializeOwned + Debug,
{
    patched(
        api,
        name,
        Patch::Merge(json!({"metadata": {"labels": labels}})),
    )
    .await
}

/// What an eviction of `name` answers when it is allowed (`Some(Success)`).
pub async fn evicted(pods: &Api<Pod>, name: &str) -> Option<StatusSummary> {
    pods.evict(name, &EvictParams::default())
        .await
        .expect("the eviction is allowed")
        .status
}

/// The answer of an allowed eviction.
pub const EVICTED: Option<StatusSummary> = Some(StatusSummary::Success);

/// The Status of a refused eviction of `name`.
pub async fn eviction_refused(pods: &Api<Pod>, name: &str) -> Box<kube::core::Status> {
    refused(pods.evict(name, &EvictParams::default())).await
}

/// A pod of one busybox container named `c`, with no node.
pub fn bare_pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}})
}

/// Creates the namespace `name` in `sim`.
pub fn create_namespace(sim: &SimHandle, name: &str) {
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    sim.create_json("", "namespaces", "", namespace, false)
        .expect("the namespace is created");
}

/// The names of what `api` lists with `params`.
pub async fn listed<K>(api: &Api<K>, params: &kube::api::ListParams) -> Vec<String>
where
    K: Clone + DeserializeOwned + Debug + kube::Resource,
{
    api.list(params)
        .await
        .expect("the list is served")
        .items
        .iter()
        .map(|object| object.meta().name.clone().expect("a name"))
        .collect()
}

/// The name of the first object `api` lists.
pub async fn first_listed<K>(api: &Api<K>) -> String
where
    K: Clone + DeserializeOwned + Debug + kube::Resource,
{
    listed(api, &kube::api::ListParams::default()).await[0].clone()
}
