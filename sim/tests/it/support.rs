//! Helpers shared by the simulator conformance tests.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use nmo_sim::{Scenario, SimConfig, SimHandle, Simulator};
use serde_json::Value;

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
