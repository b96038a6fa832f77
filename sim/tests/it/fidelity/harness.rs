//! The same request to the simulator and to a real kube-apiserver, and a comparison of what
//! each answered modulo what a server generates.
//!
//! Each case gets a fresh simulator (with its controllers but without its kubelet: a real
//! API server has none) and a namespace of its own on the binary's one real control plane
//! (nmo-envtest, with its controller manager, so budgets get their status); both use the same
//! unique namespace and node names, so requests and answers need no translation.

use std::collections::BTreeSet;
use std::time::Duration;

use nmo_envtest::testing::eventually;
use nmo_envtest::{Component, ControlPlane, Options, unique_name, yaml_files_in};
use nmo_sim::{SimConfig, SimHandle, Simulator};
use serde_json::{Map, Value, json};
use tokio::sync::OnceCell;

use crate::support::nm_crd;

/// The real control plane, with the CRD installed once.
static REAL: OnceCell<&'static ControlPlane> = OnceCell::const_new();

async fn real_plane() -> &'static ControlPlane {
    REAL.get_or_init(|| async {
        // etcd compacted every few seconds (rather than 5 minutes), so that an old
        // resourceVersion is soon too old to watch from, as the 410 case needs.
        let options = Options {
            extra_args: vec![(Component::ApiServer, "--etcd-compaction-interval=5s".into())],
            ..Options::default()
        };
        let plane = ControlPlane::shared_with(&options)
            .unwrap_or_else(|error| panic!("the fidelity suite needs a real API server: {error}"));
        let deploy = yaml_files_in(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../deploy/base")
                .as_path(),
        )
        .expect("deploy/base is readable");
        let crd: Vec<_> = deploy
            .into_iter()
            .filter(|path| path.ends_with("crd.yaml"))
            .collect();
        plane.install_crds(&crd).await.expect("the CRD installs");
        plane
    })
    .await
}

/// What one server answered.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The HTTP status code.
    pub code: u16,
    /// The body, as JSON (a watch: its events as an array; not JSON: a string).
    pub body: Value,
}

/// One of the two servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The simulator.
    Sim,
    /// The real kube-apiserver.
    Real,
}

impl Side {
    /// This side's half of a (simulator, real) pair.
    pub fn of<T>(self, (sim, real): &(T, T)) -> &T {
        match self {
            Side::Sim => sim,
            Side::Real => real,
        }
    }
}

/// A request, sent the same to both servers.
#[derive(Clone, Debug)]
pub struct Req {
    method: http::Method,
    path: String,
    content_type: Option<&'static str>,
    body: Option<Value>,
}

impl Req {
    pub fn get(path: impl Into<String>) -> Req {
        Req {
            method: http::Method::GET,
            path: path.into(),
            content_type: None,
            body: None,
        }
    }

    pub fn post(path: impl Into<String>, body: Value) -> Req {
        Req {
            method: http::Method::POST,
            path: path.into(),
            content_type: Some("application/json"),
            body: Some(body),
        }
    }

    pub fn put(path: impl Into<String>, body: Value) -> Req {
        Req {
            method: http::Method::PUT,
            ..Req::post(path, body)
        }
    }

    pub fn delete(path: impl Into<String>, body: Option<Value>) -> Req {
        Req {
            method: http::Method::DELETE,
            path: path.into(),
            content_type: body.as_ref().map(|_| "application/json"),
            body,
        }
    }

    /// PATCH with `content_type` (`application/json-patch+json`, `merge-patch+json`,
    /// `strategic-merge-patch+json`).
    pub fn patch(path: impl Into<String>, content_type: &'static str, body: Value) -> Req {
        Req {
            method: http::Method::PATCH,
            path: path.into(),
            content_type: Some(content_type),
            body: Some(body),
        }
    }
}

pub const JSON_PATCH: &str = "application/json-patch+json";
pub const MERGE_PATCH: &str = "application/merge-patch+json";
pub const STRATEGIC_PATCH: &str = "application/strategic-merge-patch+json";

async fn send(client: &kube::Client, req: &Req) -> Reply {
    let mut builder = http::Request::builder()
        .method(req.method.clone())
        .uri(&req.path);
    if let Some(content_type) = req.content_type {
        builder = builder.header("content-type", content_type);
    }
    let bytes = req
        .body
        .as_ref()
        .map(|body| serde_json::to_vec(body).expect("JSON"))
        .unwrap_or_default();
    let request = builder
        .body(kube::client::Body::from(bytes))
        .expect("a request");
    let response = tokio::time::timeout(Duration::from_secs(30), client.send(request))
        .await
        .expect("an answer within 30 s")
        .expect("the request is sent");
    let code = response.status().as_u16();
    let data = tokio::time::timeout(
        Duration::from_secs(30),
        response.into_body().collect_bytes(),
    )
    .await
    .expect("the body within 30 s")
    .expect("the body");
    let text = String::from_utf8_lossy(&data).into_owned();
    let body = if req.path.contains("watch=") {
        Value::Array(
            text.lines()
                .filter(|line| !line.trim().is_empty())
                .map(|line| serde_json::from_str(line).unwrap_or(Value::String(line.into())))
                .collect(),
        )
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    Reply { code, body }
}

/// A simulator and a real API server, each with the case's namespace.
pub struct Pair {
    /// Kept for the case's lifetime (dropping it stops the simulator).
    _sim: SimHandle,
    sim_client: kube::Client,
    real_client: kube::Client,
    /// The case's namespace (the same name on both).
    pub ns: String,
}

impl Pair {
    /// A fresh simulator, the real API server, and a namespace of the case's own on each.
    pub async fn start() -> Pair {
        Pair::start_with(|_| {}).await
    }

    /// The same, with the simulator's configuration adjusted by `configure`.
    pub async fn start_with(configure: impl FnOnce(&mut SimConfig)) -> Pair {
        let plane = real_plane().await;
        let mut config = SimConfig::default().crd_json(nm_crd());
        config.kubelet = false;
        configure(&mut config);
        let sim = Simulator::start(config)
            .await
            .expect("the simulator starts");
        let sim_client = sim.kube_client().expect("a client");
        // Without kube's own retries (it resends a 429 for minutes): each answer as sent.
        let mut real_config = plane
            .client_config(&nmo_envtest::Identity::admin())
            .expect("an admin configuration");
        real_config.default_retry = false;
        let real_client = kube::Client::try_from(real_config).expect("an admin client");
        let pair = Pair {
            _sim: sim,
            sim_client,
            real_client,
            ns: unique_name("fidelity"),
        };
        pair.seed(Req::post(
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": pair.ns}}),
        ))
        .await;
        pair
    }

    /// A name unique to this case (for cluster-scoped objects such as nodes), the same on both.
    pub fn unique(&self, prefix: &str) -> String {
        unique_name(prefix)
    }

    /// `path` with `{ns}` replaced by the case's namespace.
    pub fn path(&self, path: &str) -> String {
        path.replace("{ns}", &self.ns)
    }

    /// The client of `side`'s server.
    fn client(&self, side: Side) -> &kube::Client {
        match side {
            Side::Sim => &self.sim_client,
            Side::Real => &self.real_client,
        }
    }

    /// Sends `req` to `side`'s server only.
    pub async fn on(&self, side: Side, req: Req) -> Reply {
        let req = Req {
            path: self.path(&req.path),
            ..req
        };
        send(self.client(side), &req).await
    }

    /// Sends to each server, at once, the request `req` builds for it (when the two need
    /// different bodies, such as their own resourceVersions); (simulator, real).
    pub async fn each(&self, req: impl Fn(Side) -> Req) -> (Reply, Reply) {
        tokio::join!(
            self.on(Side::Sim, req(Side::Sim)),
            self.on(Side::Real, req(Side::Real))
        )
    }

    /// Sends `req` to both; (simulator, real).
    pub async fn both(&self, req: Req) -> (Reply, Reply) {
        self.each(|_| req.clone()).await
    }

    /// Sends `req` to both and compares what they answer (`what` names the request).
    pub async fn compare(&self, what: impl Into<String>, req: Req) -> Compare {
        compare(what, self.both(req).await)
    }

    /// Sends to each server the request `req` builds for it, and compares what they answer.
    pub async fn compare_each(
        &self,
        what: impl Into<String>,
        req: impl Fn(Side) -> Req,
    ) -> Compare {
        compare(what, self.each(req).await)
    }

    /// Sends `req` to both, expecting success from each (setting up a case).
    pub async fn seed(&self, req: Req) -> (Reply, Reply) {
        let (sim, real) = self.both(req.clone()).await;
        assert!(
            sim.code < 300 && real.code < 300,
            "setting up with {} {}: simulator {} {}, real {} {}",
            req.method,
            req.path,
            sim.code,
            sim.body,
            real.code,
            real.body
        );
        (sim, real)
    }

    /// Waits until `check` holds for what both answer to `req` (e.g. a budget's status).
    pub async fn until(&self, what: &str, req: Req, check: impl Fn(&Reply) -> bool) {
        eventually(what, Duration::from_secs(30), async || {
            let (sim, real) = self.both(req.clone()).await;
            if check(&sim) && check(&real) {
                Ok(())
            } else {
                Err(format!(
                    "simulator {} {}, real {} {}",
                    sim.code, sim.body, real.code, real.body
                ))
            }
        })
        .await;
    }
}

/// Whether `text` is an RFC 3339 time (what servers stamp).
fn is_time(text: &str) -> bool {
    chrono::DateTime::parse_from_rfc3339(text).is_ok()
}

/// `value` without what a server generates: uids, resourceVersions, managedFields, creation
/// and other timestamps (kept as `<time>`, so their presence still counts), continue tokens.
pub fn normalize(value: &Value) -> Value {
    match value {
        Value::Object(fields) => {
            let mut out = Map::new();
            for (key, field) in fields {
                // Server-side apply's bookkeeping: the simulator keeps none (see its docs).
                if key == "managedFields" {
                    continue;
                }
                let generated = matches!(key.as_str(), "uid" | "resourceVersion" | "selfLink");
                if generated {
                    out.insert(key.clone(), json!("<generated>"));
                    continue;
                }
                if key == "continue" && field.is_string() {
                    out.insert(key.clone(), json!("<continue>"));
                    continue;
                }
                out.insert(key.clone(), normalize(field));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(normalize).collect()),
        Value::String(text) if is_time(text) => json!("<time>"),
        other => other.clone(),
    }
}

/// The JSON pointers where `a` and `b` differ, with both values.
pub fn differences(a: &Value, b: &Value) -> Vec<(String, Value, Value)> {
    let mut out = Vec::new();
    diff_into("", a, b, &mut out);
    out
}

fn diff_into(path: &str, a: &Value, b: &Value, out: &mut Vec<(String, Value, Value)>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let pointer = format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"));
                diff_into(
                    &pointer,
                    x.get(key).unwrap_or(&Value::Null),
                    y.get(key).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                diff_into(&format!("{path}/{i}"), x, y, out);
            }
            // What only one of them has, element by element.
            let shorter = x.len().min(y.len());
            for i in shorter..x.len().max(y.len()) {
                let (a, b) = (x.get(i), y.get(i));
                out.push((
                    format!("{path}/{i}"),
                    a.cloned().unwrap_or(Value::Null),
                    b.cloned().unwrap_or(Value::Null),
                ));
            }
        }
        _ if a == b => {}
        _ => out.push((path.to_string(), a.clone(), b.clone())),
    }
}

/// A comparison of the two answers to one request.
pub struct Compare {
    what: String,
    sim: Reply,
    real: Reply,
    known: Vec<(String, String)>,
    unordered: Vec<String>,
}

/// Compares the simulator's answer with the real one's (as `Pair::both` returns them).
pub fn compare(what: impl Into<String>, (sim, real): (Reply, Reply)) -> Compare {
    Compare {
        what: what.into(),
        sim,
        real,
        known: Vec::new(),
        unordered: Vec::new(),
    }
}

/// `value` with the array at `pointer` (if any) sorted, so its order does not count.
fn sorted_at(mut value: Value, pointer: &str) -> Value {
    if let Some(Value::Array(items)) = value.pointer_mut(pointer) {
        items.sort_by_key(Value::to_string);
    }
    value
}

impl Compare {
    /// A known difference at a JSON pointer prefix (and all under it), with why it is
    /// accepted: each is listed in nmo-sim's crate docs ("Where it is NOT faithful").
    #[must_use]
    pub fn known(mut self, pointer: impl Into<String>, why: impl Into<String>) -> Self {
        self.known.push((pointer.into(), why.into()));
        self
    }

    /// The array at `pointer` is compared as a set (a server that reports several causes in
    /// no fixed order).
    #[must_use]
    pub fn unordered(mut self, pointer: impl Into<String>) -> Self {
        self.unordered.push(pointer.into());
        self
    }

    /// The known difference of the pod at `pod` (a JSON pointer; "" for the body itself): the
    /// `spec.serviceAccountName` only the simulator defaults.
    #[must_use]
    pub fn defaulted_service_account(self, pod: &str) -> Self {
        self.known(
            format!("{pod}/spec/serviceAccountName"),
            "see crud::a_created_pod_is_defaulted_alike",
        )
    }

    /// The same for each pod at `pods`.
    #[must_use]
    pub fn defaulted_service_accounts(self, pods: impl IntoIterator<Item = String>) -> Self {
        pods.into_iter()
            .fold(self, |compare, pod| compare.defaulted_service_account(&pod))
    }

    /// Panics, listing each difference, unless code and normalized body are the same.
    pub fn same(self) {
        let mut problems = Vec::new();
        if self.sim.code != self.real.code {
            problems.push(format!(
                "status code: simulator {}, real {}",
                self.sim.code, self.real.code
            ));
        }
        let (mut sim_body, mut real_body) = (normalize(&self.sim.body), normalize(&self.real.body));
        for pointer in &self.unordered {
            sim_body = sorted_at(sim_body, pointer);
            real_body = sorted_at(real_body, pointer);
        }
        for (pointer, sim, real) in differences(&sim_body, &real_body) {
            let accepted = self.known.iter().any(|(prefix, _)| {
                pointer == *prefix || pointer.starts_with(&format!("{prefix}/"))
            });
            if !accepted {
                problems.push(format!("{pointer}: simulator {sim}, real {real}"));
            }
        }
        assert!(
            problems.is_empty(),
            "{}: the simulator differs from a real API server:\n  {}\nsimulator: {}\nreal: {}",
            self.what,
            problems.join("\n  "),
            self.sim.body,
            self.real.body
        );
    }
}

#[test]
fn normalizing_keeps_what_the_request_decides_and_hides_what_a_server_generates() {
    let object = json!({"metadata": {"name": "a", "uid": "1", "resourceVersion": "9",
                                     "creationTimestamp": "2026-01-01T00:00:00Z",
                                     "ownerReferences": [{"uid": "x", "name": "o"}]},
                        "spec": {"n": 1}});
    assert_eq!(
        normalize(&object),
        json!({"metadata": {"name": "a", "uid": "<generated>", "resourceVersion": "<generated>",
                            "creationTimestamp": "<time>",
                            "ownerReferences": [{"uid": "<generated>", "name": "o"}]},
               "spec": {"n": 1}})
    );
    let diff = differences(
        &json!({"a": 1, "b": [1, 2]}),
        &json!({"a": 2, "b": [1, 2, 3]}),
    );
    assert_eq!(
        diff,
        vec![
            ("/a".to_string(), json!(1), json!(2)),
            ("/b/2".to_string(), json!(null), json!(3))
        ]
    );
}
