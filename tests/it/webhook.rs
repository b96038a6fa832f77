//! The admission webhook end to end: real AdmissionReviews over HTTPS (a throwaway CA made
//! here), the webhook reading the cluster through a real kube client.
//!
//! The cluster is a small stub API server in this module (it serves exactly the GETs and LISTs
//! the webhook makes, with real Kubernetes JSON, and records them). Once the simulated API server
//! (`nmo::sim`) is on main, these tests can switch to it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{Request, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use nmo::crd::{NodeMaintenance, NodeMaintenanceSpec};
use nmo::webhook::{self, VALIDATE_PATH, Webhook, WebhookConfig, WebhookError};
use rustls::RootCertStore;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_rustls::TlsConnector;

// ---------------------------------------------------------------------------------------------
// The stub API server.

/// What the stub cluster holds, and what it was asked.
#[derive(Default)]
struct Cluster {
    nodes: Vec<Value>,
    maintenances: Vec<Value>,
    etcd_pdbs: Vec<Value>,
    etcd_pods: Vec<Value>,
    /// Requests whose path ends with one of these answer 500.
    failing: Vec<String>,
    /// Every request, as `path?query`.
    requests: Vec<String>,
}

type Shared = Arc<Mutex<Cluster>>;

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code,
    });
    (
        StatusCode::from_u16(code).unwrap(),
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn list(kind: &str, api_version: &str, items: Vec<Value>) -> Response {
    axum::Json(json!({
        "kind": kind, "apiVersion": api_version,
        "metadata": {"resourceVersion": "7"}, "items": items,
    }))
    .into_response()
}

fn label_matches(object: &Value, selector: &str) -> bool {
    selector.split(',').all(|term| {
        let labels = &object["metadata"]["labels"];
        match term.split_once('=') {
            Some((key, value)) => labels[key] == value,
            None => !labels[term].is_null(),
        }
    })
}

fn field_matches(object: &Value, selector: &str) -> bool {
    selector.split(',').all(|term| match term.split_once('=') {
        Some(("spec.nodeName", node)) => object["spec"]["nodeName"] == node,
        _ => panic!("the stub does not know field selector {term}"),
    })
}

fn select(items: &[Value], query: &BTreeMap<String, String>) -> Vec<Value> {
    items
        .iter()
        .filter(|o| {
            query
                .get("labelSelector")
                .is_none_or(|s| label_matches(o, s))
        })
        .filter(|o| {
            query
                .get("fieldSelector")
                .is_none_or(|s| field_matches(o, s))
        })
        .cloned()
        .collect()
}

async fn api(
    State(cluster): State<Shared>,
    Query(query): Query<BTreeMap<String, String>>,
    uri: Uri,
) -> Response {
    let mut cluster = cluster.lock().unwrap();
    cluster.requests.push(uri.to_string());
    let path = uri.path();
    if cluster.failing.iter().any(|f| path.ends_with(f.as_str())) {
        return status(500, "InternalError", "etcdserver: request timed out");
    }
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        ["api", "v1", "nodes", name] => {
            match cluster
                .nodes
                .iter()
                .find(|n| n["metadata"]["name"] == *name)
            {
                Some(node) => axum::Json(node.clone()).into_response(),
                None => status(404, "NotFound", &format!("nodes \"{name}\" not found")),
            }
        }
        ["api", "v1", "nodes"] => list("NodeList", "v1", select(&cluster.nodes, &query)),
        [
            "apis",
            "nodemaintenance.medik8s.io",
            "v1beta1",
            "nodemaintenances",
        ] => list(
            "NodeMaintenanceList",
            "nodemaintenance.medik8s.io/v1beta1",
            select(&cluster.maintenances, &query),
        ),
        [
            "apis",
            "policy",
            "v1",
            "namespaces",
            "openshift-etcd",
            "poddisruptionbudgets",
        ] => list(
            "PodDisruptionBudgetList",
            "policy/v1",
            select(&cluster.etcd_pdbs, &query),
        ),
        ["api", "v1", "namespaces", "openshift-etcd", "pods"] => {
            list("PodList", "v1", select(&cluster.etcd_pods, &query))
        }
        _ => status(404, "NotFound", &format!("the stub does not serve {path}")),
    }
}

async fn start_stub(cluster: Shared) -> kube::Client {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = Router::new().fallback(api).with_state(cluster);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let config = kube::Config::new(format!("http://{address}").parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Cluster objects, as the real API server returns them.

fn node(name: &str, labels: &[&str]) -> Value {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|l| (l.to_string(), json!("")))
        .chain([("kubernetes.io/hostname".to_string(), json!(name))])
        .collect();
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "3", "labels": labels},
        "spec": {"podCIDR": "10.244.1.0/24"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }))
    .unwrap();
    serde_json::to_value(node).unwrap()
}

fn maintenance(name: &str, node_name: &str) -> Value {
    let nm = NodeMaintenance::new(
        name,
        NodeMaintenanceSpec {
            node_name: node_name.to_string(),
            reason: Some("test".to_string()),
        },
    );
    serde_json::to_value(nm).unwrap()
}

fn guard_pdb(name: &str, disruptions_allowed: i32) -> Value {
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "openshift-etcd"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "guard"}}},
        "status": {"currentHealthy": 3 - (1 - disruptions_allowed).max(0), "desiredHealthy": 2,
                   "disruptionsAllowed": disruptions_allowed, "expectedPods": 3},
    }))
    .unwrap();
    serde_json::to_value(pdb).unwrap()
}

fn guard_pod(node_name: &str, ready: bool) -> Value {
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("etcd-guard-{node_name}"), "namespace": "openshift-etcd",
                     "labels": {"app": "guard"}},
        "spec": {"nodeName": node_name, "containers": [{"name": "guard", "image": "guard"}]},
        "status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": if ready { "True" } else { "False" }}]},
    }))
    .unwrap();
    serde_json::to_value(pod).unwrap()
}

const CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";
const MASTER: &str = "node-role.kubernetes.io/master";

// ---------------------------------------------------------------------------------------------
// Certificates.

/// A throwaway CA and the serving certificates it signs.
struct Ca {
    params: rcgen::CertificateParams,
    key: rcgen::KeyPair,
    cert: rcgen::Certificate,
}

impl Ca {
    fn new(name: &str) -> Self {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let cert = params.self_signed(&key).unwrap();
        Self { params, key, cert }
    }

    /// A serving certificate for the webhook Service and localhost, with `serial`: (cert, key).
    fn serving(&self, serial: u64) -> (rcgen::Certificate, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec![
            "localhost".to_string(),
            "nmo-webhook.nmo-system.svc".to_string(),
        ])
        .unwrap();
        params.serial_number = Some(rcgen::SerialNumber::from(serial));
        let issuer = rcgen::Issuer::from_params(&self.params, &self.key);
        (
            params.signed_by(&key, &issuer).unwrap(),
            key.serialize_pem(),
        )
    }

    fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }
}

/// Writes the pair the way the kubelet updates a mounted secret: new files renamed over.
fn write_pair(dir: &Path, cert_name: &str, key_name: &str, cert: &rcgen::Certificate, key: &str) {
    for (name, contents) in [(cert_name, cert.pem()), (key_name, key.to_string())] {
        let temp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&temp, contents).unwrap();
        std::fs::rename(&temp, dir.join(name)).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// The webhook under test, and an HTTPS client for it.

struct Harness {
    address: SocketAddr,
    ca: Ca,
    cert_dir: tempfile::TempDir,
    cluster: Shared,
    stop: Option<oneshot::Sender<()>>,
    served: tokio::task::JoinHandle<Result<(), WebhookError>>,
}

impl Harness {
    async fn start(cluster: Cluster) -> Self {
        Self::start_with(cluster, false).await
    }

    async fn start_with(cluster: Cluster, enable_http2: bool) -> Self {
        let cluster = Arc::new(Mutex::new(cluster));
        let client = start_stub(cluster.clone()).await;
        let ca = Ca::new("nmo test CA");
        let cert_dir = tempfile::tempdir().unwrap();
        let (cert, key) = ca.serving(1);
        // The Go operator's OLM file names.
        write_pair(
            cert_dir.path(),
            "apiserver.crt",
            "apiserver.key",
            &cert,
            &key,
        );
        let config = WebhookConfig {
            port: 0,
            cert_dir: cert_dir.path().to_path_buf(),
            enable_http2,
        };
        let webhook = Webhook::bind(&config, "127.0.0.1:0".parse().unwrap(), client)
            .await
            .unwrap();
        let address = webhook.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let served = tokio::spawn(webhook.run(async move {
            let _ = stopped.await;
        }));
        Self {
            address,
            ca,
            cert_dir,
            cluster,
            stop: Some(stop),
            served,
        }
    }

    fn requests(&self) -> Vec<String> {
        self.cluster.lock().unwrap().requests.clone()
    }

    /// POSTs `body` to `path` on a new TLS connection trusting `roots` (the harness CA when
    /// empty). Returns the HTTP status, the body and the server's leaf certificate.
    async fn post_raw_trusting(
        &self,
        path: &str,
        body: String,
        roots: &[CertificateDer<'static>],
    ) -> Result<(StatusCode, Vec<u8>, CertificateDer<'static>), String> {
        let mut store = RootCertStore::empty();
        let default_roots = [self.ca.der()];
        for root in if roots.is_empty() {
            &default_roots[..]
        } else {
            roots
        } {
            store.add(root.clone()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(store)
            .with_no_client_auth();
        let tcp = TcpStream::connect(self.address).await.unwrap();
        let tls = TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .map_err(|e| e.to_string())?;
        let leaf = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(connection);
        let request = Request::post(path)
            .header("host", "nmo-webhook.nmo-system.svc")
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(Body::new(response.into_body()), usize::MAX)
            .await
            .unwrap();
        Ok((status, bytes.to_vec(), leaf))
    }

    async fn post_raw(&self, body: String) -> (StatusCode, Vec<u8>) {
        let (status, body, _) = self
            .post_raw_trusting(VALIDATE_PATH, body, &[])
            .await
            .unwrap();
        (status, body)
    }

    /// Sends an AdmissionReview and returns its `response`, checking the envelope on the way.
    async fn review(&self, review: Value) -> Value {
        let uid = review["request"]["uid"].clone();
        let (status, body) = self.post_raw(review.to_string()).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        let answer: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(answer["apiVersion"], "admission.k8s.io/v1", "{answer}");
        assert_eq!(answer["kind"], "AdmissionReview", "{answer}");
        assert_eq!(answer["response"]["uid"], uid, "{answer}");
        answer["response"].clone()
    }

    async fn create(&self, name: &str, node_name: &str) -> Value {
        self.review(admission(
            "CREATE",
            Some(maintenance(name, node_name)),
            None,
        ))
        .await
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(Duration::from_secs(10), self.served)
            .await
            .expect("the webhook stops when asked")
            .unwrap()
            .unwrap();
    }
}

/// An AdmissionReview as the API server sends it for a NodeMaintenance.
fn admission(operation: &str, object: Option<Value>, old_object: Option<Value>) -> Value {
    let name = object
        .as_ref()
        .or(old_object.as_ref())
        .map(|o| o["metadata"]["name"].clone())
        .unwrap_or(json!(""));
    let gvk = json!({"group": "nodemaintenance.medik8s.io", "version": "v1beta1", "kind": "NodeMaintenance"});
    let gvr = json!({"group": "nodemaintenance.medik8s.io", "version": "v1beta1", "resource": "nodemaintenances"});
    let options_kind = match operation {
        "CREATE" => "CreateOptions",
        "UPDATE" => "UpdateOptions",
        _ => "DeleteOptions",
    };
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": format!("uid-{operation}-{}", name.as_str().unwrap_or_default()),
            "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
            "name": name,
            "operation": operation,
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
            "object": object,
            "oldObject": old_object,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": options_kind},
        }
    })
}

fn assert_allowed(response: &Value) {
    assert_eq!(response["allowed"], true, "{response}");
}

fn assert_denied(response: &Value, message: &str) {
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["message"], message, "{response}");
    assert_eq!(response["status"]["code"], 403, "{response}");
    assert_eq!(response["status"]["reason"], "Forbidden", "{response}");
}

fn quorum_message(node: &str) -> String {
    format!(
        "can not put master/control-plane node into maintenance at this moment, disrupting node {node} will violate etcd quorum"
    )
}

// ---------------------------------------------------------------------------------------------
// Node existence and one NodeMaintenance per node.

#[tokio::test]
async fn create_for_an_existing_worker_is_allowed_without_quorum_lookups() {
    let harness = Harness::start(Cluster {
        nodes: vec![node("worker-1", &["node-role.kubernetes.io/worker"])],
        ..Default::default()
    })
    .await;
    assert_allowed(&harness.create("nm-1", "worker-1").await);
    let requests = harness.requests();
    assert!(
        requests.iter().all(|r| !r.contains("openshift-etcd")),
        "a worker never costs an etcd lookup: {requests:?}"
    );
    harness.stop().await;
}

#[tokio::test]
async fn create_for_a_missing_node_is_denied_naming_it() {
    let harness = Harness::start(Cluster {
        nodes: vec![node("worker-1", &[])],
        ..Default::default()
    })
    .await;
    let response = harness.create("nm-1", "worker-9").await;
    assert_denied(
        &response,
        "invalid nodeName, no node with name worker-9 found",
    );
    let response = harness.create("nm-2", "").await;
    assert_denied(&response, "invalid nodeName, no node with name  found");
    harness.stop().await;
}

#[tokio::test]
async fn a_second_maintenance_for_a_node_is_denied_even_while_the_first_is_deleted() {
    let mut being_deleted = maintenance("old", "worker-2");
    being_deleted["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    being_deleted["metadata"]["finalizers"] = json!(["foregroundDeleteNodeMaintenance"]);
    let harness = Harness::start(Cluster {
        nodes: vec![node("worker-1", &[]), node("worker-2", &[])],
        maintenances: vec![maintenance("first", "worker-1"), being_deleted],
        ..Default::default()
    })
    .await;
    assert_denied(
        &harness.create("second", "worker-1").await,
        "invalid nodeName, a NodeMaintenance for node worker-1 already exists",
    );
    assert_denied(
        &harness.create("third", "worker-2").await,
        "invalid nodeName, a NodeMaintenance for node worker-2 already exists",
    );
    harness.stop().await;
}

#[tokio::test]
async fn updates_may_change_anything_but_the_node_name() {
    // The node is gone: an update (say, removing the finalizer) must still pass.
    let harness = Harness::start(Cluster::default()).await;
    let old = maintenance("nm-1", "worker-1");
    let mut new_reason = old.clone();
    new_reason["spec"]["reason"] = json!("kernel upgrade");
    new_reason["metadata"]["finalizers"] = json!([]);
    assert_allowed(
        &harness
            .review(admission("UPDATE", Some(new_reason), Some(old.clone())))
            .await,
    );
    let mut new_node = old.clone();
    new_node["spec"]["nodeName"] = json!("worker-2");
    assert_denied(
        &harness
            .review(admission("UPDATE", Some(new_node), Some(old)))
            .await,
        "updating spec.NodeName isn't allowed",
    );
    assert!(
        harness.requests().is_empty(),
        "updates need no lookups: {:?}",
        harness.requests()
    );
    harness.stop().await;
}

#[tokio::test]
async fn delete_is_allowed() {
    let harness = Harness::start(Cluster::default()).await;
    let response = harness
        .review(admission(
            "DELETE",
            None,
            Some(maintenance("nm-1", "worker-1")),
        ))
        .await;
    assert_allowed(&response);
    harness.stop().await;
}

// ---------------------------------------------------------------------------------------------
// The control-plane quorum guard, OpenShift (etcd guard PDB).

fn openshift(pdbs: Vec<Value>, pods: Vec<Value>) -> Cluster {
    Cluster {
        nodes: vec![
            node("master-0", &[CONTROL_PLANE, MASTER]),
            node("master-1", &[MASTER]),
            node("master-2", &[CONTROL_PLANE]),
        ],
        etcd_pdbs: pdbs,
        etcd_pods: pods,
        ..Default::default()
    }
}

#[tokio::test]
async fn openshift_guard_with_a_disruption_left_allows_a_control_plane_node() {
    let harness = Harness::start(openshift(
        vec![guard_pdb("etcd-guard-pdb", 1)],
        vec![guard_pod("master-0", true), guard_pod("master-1", true)],
    ))
    .await;
    assert_allowed(&harness.create("nm-0", "master-0").await);
    harness.stop().await;
}

#[tokio::test]
async fn openshift_exhausted_guard_denies_while_the_nodes_guard_pod_is_ready() {
    let harness = Harness::start(openshift(
        vec![guard_pdb("etcd-guard-pdb", 0)],
        vec![
            guard_pod("master-0", true),
            guard_pod("master-1", false),
            guard_pod("master-2", true),
        ],
    ))
    .await;
    // master-0's etcd is healthy: taking it down would cost quorum.
    assert_denied(
        &harness.create("nm-0", "master-0").await,
        &quorum_message("master-0"),
    );
    // master-1's etcd is already the disrupted one: maintaining it costs nothing more.
    assert_allowed(&harness.create("nm-1", "master-1").await);
    let pod_lists: Vec<String> = harness
        .requests()
        .into_iter()
        .filter(|r| r.contains("/pods"))
        .collect();
    assert!(
        pod_lists
            .iter()
            .all(|r| r.contains("labelSelector=app%3Dguard")),
        "guard pods are selected by the PDB's selector: {pod_lists:?}"
    );
    harness.stop().await;
}

#[tokio::test]
async fn openshift_without_exactly_one_guard_pdb_denies() {
    for pdbs in [
        vec![
            guard_pdb("etcd-guard-pdb", 1),
            guard_pdb("etcd-quorum-guard", 1),
        ],
        vec![guard_pdb("some-other-budget", 1)],
    ] {
        let harness = Harness::start(openshift(pdbs, Vec::new())).await;
        assert_denied(
            &harness.create("nm-2", "master-2").await,
            &quorum_message("master-2"),
        );
        harness.stop().await;
    }
}

#[tokio::test]
async fn openshift_old_guard_pdb_name_is_honoured() {
    let harness = Harness::start(openshift(
        vec![guard_pdb("etcd-quorum-guard", 1)],
        Vec::new(),
    ))
    .await;
    assert_allowed(&harness.create("nm-2", "master-2").await);
    harness.stop().await;
}

// ---------------------------------------------------------------------------------------------
// The control-plane quorum guard without OpenShift: one control-plane node at a time.

#[tokio::test]
async fn without_a_guard_a_second_control_plane_node_is_denied_naming_the_first() {
    let mut cluster = openshift(Vec::new(), Vec::new());
    cluster.nodes.push(node("worker-1", &[]));
    cluster.maintenances = vec![
        maintenance("worker-upgrade", "worker-1"),
        maintenance("master-0-kernel", "master-0"),
    ];
    let harness = Harness::start(cluster).await;
    let response = harness.create("master-1-kernel", "master-1").await;
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().unwrap();
    assert!(message.contains("master-0-kernel"), "{message}");
    assert!(message.contains("master-0"), "{message}");
    assert!(message.contains("master-1"), "{message}");
    harness.stop().await;
}

#[tokio::test]
async fn without_a_guard_one_control_plane_node_at_a_time_is_allowed() {
    let mut cluster = openshift(Vec::new(), Vec::new());
    cluster.nodes.push(node("worker-1", &[]));
    cluster.maintenances = vec![maintenance("worker-upgrade", "worker-1")];
    let harness = Harness::start(cluster).await;
    // Labelled with the pre-1.24 role only.
    assert_allowed(&harness.create("master-1-kernel", "master-1").await);
    harness.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Failures never allow by accident.

#[tokio::test]
async fn lookup_failures_deny_asking_to_try_again() {
    for failing in [
        "/nodes/master-0",
        "/nodemaintenances",
        "/poddisruptionbudgets",
        "/api/v1/nodes",
    ] {
        let mut cluster = openshift(Vec::new(), Vec::new());
        cluster.nodes.push(node("worker-1", &[]));
        cluster.maintenances = vec![maintenance("worker-upgrade", "worker-1")];
        cluster.failing = vec![failing.to_string()];
        let harness = Harness::start(cluster).await;
        let response = harness.create("nm-0", "master-0").await;
        assert_eq!(response["allowed"], false, "{failing}: {response}");
        let message = response["status"]["message"].as_str().unwrap();
        assert!(
            message.ends_with("please try again"),
            "{failing}: {message}"
        );
        harness.stop().await;
    }
}

#[tokio::test]
async fn guard_pod_lookup_failure_denies() {
    let mut cluster = openshift(vec![guard_pdb("etcd-guard-pdb", 0)], Vec::new());
    cluster.failing = vec!["/pods".to_string()];
    let harness = Harness::start(cluster).await;
    let response = harness.create("nm-0", "master-0").await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .ends_with("please try again"),
        "{response}"
    );
    harness.stop().await;
}

#[tokio::test]
async fn malformed_reviews_get_a_clean_400_and_the_server_keeps_serving() {
    let harness = Harness::start(Cluster {
        nodes: vec![node("worker-1", &[])],
        ..Default::default()
    })
    .await;
    let mut v1beta1 = admission("CREATE", Some(maintenance("nm-1", "worker-1")), None);
    v1beta1["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let no_request = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"});
    for body in [
        "{not json".to_string(),
        "[]".to_string(),
        v1beta1.to_string(),
        no_request.to_string(),
    ] {
        let (status, answer) = harness.post_raw(body.clone()).await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            String::from_utf8_lossy(&answer)
        );
        assert!(!answer.is_empty(), "a 400 says why");
    }
    // An object that is not a NodeMaintenance is denied, not allowed.
    let response = harness
        .review(admission(
            "CREATE",
            Some(json!({"apiVersion": "nodemaintenance.medik8s.io/v1beta1",
                        "kind": "NodeMaintenance", "metadata": {"name": "x"}, "spec": {}})),
            None,
        ))
        .await;
    assert_eq!(response["allowed"], false, "{response}");
    // Other paths are not served.
    let (status, _, _) = harness
        .post_raw_trusting("/validate-something-else", "{}".to_string(), &[])
        .await
        .unwrap();
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Still serving.
    assert_allowed(&harness.create("nm-1", "worker-1").await);
    harness.stop().await;
}

// ---------------------------------------------------------------------------------------------
// TLS: certificate rotation, HTTP/2, startup errors.

#[tokio::test]
async fn a_rotated_certificate_is_served_without_a_restart() {
    let harness = Harness::start(Cluster {
        nodes: vec![node("worker-1", &[])],
        ..Default::default()
    })
    .await;
    let review = admission("CREATE", Some(maintenance("nm-1", "worker-1")), None).to_string();
    let (_, _, before) = harness
        .post_raw_trusting(VALIDATE_PATH, review.clone(), &[])
        .await
        .unwrap();

    // cert-manager renews with a new CA (the worst case), and a new serial.
    let second_ca = Ca::new("rotated CA");
    let (rotated, key) = second_ca.serving(2);
    assert!(
        harness
            .post_raw_trusting(VALIDATE_PATH, review.clone(), &[second_ca.der()])
            .await
            .is_err(),
        "before the rotation, the new CA must not be trusted by the server's certificate"
    );
    write_pair(
        harness.cert_dir.path(),
        "apiserver.crt",
        "apiserver.key",
        &rotated,
        &key,
    );
    let (status, _, after) = harness
        .post_raw_trusting(VALIDATE_PATH, review, &[second_ca.der()])
        .await
        .expect("the rotated certificate, signed by the new CA, is served");
    assert_eq!(status, StatusCode::OK);
    assert_ne!(before, after);
    assert_eq!(after, *rotated.der());
    harness.stop().await;
}

/// Connects offering h2 and http/1.1; returns the protocol chosen and, when it is h2, the
/// answer to a review sent over HTTP/2.
async fn negotiated_protocol(harness: &Harness) -> (Option<Vec<u8>>, Option<Value>) {
    let mut store = RootCertStore::empty();
    store.add(harness.ca.der()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(store)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(harness.address).await.unwrap();
    let tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let protocol = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    if protocol.as_deref() != Some(b"h2") {
        return (protocol, None);
    }
    let (mut sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        TokioIo::new(tls),
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    let review = admission("CREATE", Some(maintenance("nm-1", "worker-9")), None);
    let request = Request::post(format!("https://localhost{VALIDATE_PATH}"))
        .header("content-type", "application/json")
        .body(Body::from(review.to_string()))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(Body::new(response.into_body()), usize::MAX)
        .await
        .unwrap();
    let answer: Value = serde_json::from_slice(&bytes).unwrap();
    (protocol, Some(answer["response"].clone()))
}

#[tokio::test]
async fn http2_is_offered_only_when_enabled() {
    let http1 = Harness::start(Cluster::default()).await;
    let (protocol, _) = negotiated_protocol(&http1).await;
    assert_eq!(protocol.as_deref(), Some(&b"http/1.1"[..]));
    http1.stop().await;

    let http2 = Harness::start_with(Cluster::default(), true).await;
    let (protocol, response) = negotiated_protocol(&http2).await;
    assert_eq!(protocol.as_deref(), Some(&b"h2"[..]));
    // Reviews work over HTTP/2 too.
    assert_denied(
        &response.unwrap(),
        "invalid nodeName, no node with name worker-9 found",
    );
    http2.stop().await;
}

#[tokio::test]
async fn cert_manager_file_names_are_accepted() {
    let cluster = Arc::new(Mutex::new(Cluster::default()));
    let client = start_stub(cluster).await;
    let ca = Ca::new("cert-manager CA");
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = ca.serving(7);
    write_pair(dir.path(), "tls.crt", "tls.key", &cert, &key);
    let config = WebhookConfig {
        port: 0,
        cert_dir: dir.path().to_path_buf(),
        enable_http2: false,
    };
    let webhook = Webhook::bind(&config, "127.0.0.1:0".parse().unwrap(), client).await;
    assert!(webhook.is_ok(), "{:?}", webhook.err());
}

#[tokio::test]
async fn a_missing_certificate_fails_startup_naming_the_path() {
    let client = start_stub(Arc::new(Mutex::new(Cluster::default()))).await;
    let dir = tempfile::tempdir().unwrap();
    let config = WebhookConfig {
        port: 9443,
        cert_dir: dir.path().join("certificates"),
        enable_http2: false,
    };
    let error = webhook::serve(config, client, std::future::pending())
        .await
        .expect_err("no certificate, no webhook");
    let message = error.to_string();
    assert!(
        matches!(
            error,
            WebhookError::Tls(webhook::TlsError::MissingCertificate { .. })
        ),
        "{message}"
    );
    assert!(
        message.contains(
            &dir.path()
                .join("certificates/apiserver.crt")
                .display()
                .to_string()
        ),
        "{message}"
    );
}

#[tokio::test]
async fn a_disabled_webhook_needs_no_certificate_and_waits_for_shutdown() {
    let client = start_stub(Arc::new(Mutex::new(Cluster::default()))).await;
    let config = WebhookConfig {
        port: 0,
        cert_dir: "/nonexistent".into(),
        ..WebhookConfig::default()
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(webhook::serve(config, client, async move {
        let _ = stopped.await;
    }));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !task.is_finished(),
        "a disabled webhook returns only at shutdown"
    );
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
