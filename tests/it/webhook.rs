//! The admission webhook end to end: real AdmissionReviews over HTTPS (a throwaway CA made
//! here), the webhook reading the test cluster (`support::TestEnv`) through a real kube client,
//! with the RBAC of deploy/base/rbac.yaml enforced on it. The reviews that read the cluster
//! run on both backends, except where the test sets what only the simulator lets it: a
//! budget's status (a real cluster's disruption controller computes it) or a failing lookup
//! (fault injection). The HTTPS server's own behaviour (certificates, protocols, bad bodies)
//! does not depend on the cluster: those tests use the simulator as a stand-in.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use nmo::crd::{NodeMaintenance, NodeMaintenanceSpec};
use nmo::webhook::{self, VALIDATE_PATH, Webhook, WebhookConfig, WebhookError};
use nmo_sim::{FaultRule, Query};
use rustls::RootCertStore;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_rustls::TlsConnector;

use crate::support::{Backend, TestEnv, both_backends, eventually};

// ---------------------------------------------------------------------------------------------
// The cluster.

/// What the cluster holds when the webhook starts.
#[derive(Default)]
struct Cluster {
    nodes: Vec<Value>,
    maintenances: Vec<Value>,
    /// NodeMaintenances (among `maintenances`) deleted before the test, kept by their finalizer.
    deleting: Vec<&'static str>,
    etcd_pdbs: Vec<Value>,
    etcd_pods: Vec<Value>,
}

/// A cluster with the CRD where nothing acts on its own (the objects keep the status the test
/// gives them), deploy/base/rbac.yaml enforced for nmo, seeded with `cluster`; no operator.
async fn start_cluster(backend: Backend, cluster: Cluster) -> TestEnv {
    let mut builder = TestEnv::on(backend)
        .static_cluster()
        .deployed_rbac()
        .without_operator();
    for object in cluster.nodes.into_iter().chain(cluster.maintenances) {
        builder = builder.object(object);
    }
    if !cluster.etcd_pdbs.is_empty() || !cluster.etcd_pods.is_empty() {
        builder = builder.namespace("openshift-etcd");
    }
    for object in cluster.etcd_pdbs.into_iter().chain(cluster.etcd_pods) {
        builder = builder.object(object);
    }
    let env = builder.start().await;
    for name in &cluster.deleting {
        env.delete_maintenance(name).await;
    }
    env
}

// ---------------------------------------------------------------------------------------------
// Cluster objects, as the real API server returns them.

fn node(name: &str, labels: &[&str]) -> Value {
    let mut node = nmo_sim::scenario::node(name, name.len());
    for label in labels {
        node["metadata"]["labels"][*label] = json!("");
    }
    node
}

fn maintenance(name: &str, node_name: &str) -> Value {
    let mut nm = NodeMaintenance::new(
        name,
        NodeMaintenanceSpec {
            node_name: node_name.to_string(),
            reason: Some("test".to_string()),
            drain_timeout: None,
            on_drain_timeout: None,
        },
    );
    nm.metadata.finalizers = Some(vec![nmo::crd::FINALIZER.to_string()]);
    serde_json::to_value(nm).unwrap()
}

fn guard_pdb(name: &str, disruptions_allowed: i32) -> Value {
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "openshift-etcd"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "guard"}}},
        "status": {"currentHealthy": 2 + disruptions_allowed, "desiredHealthy": 2,
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
    env: TestEnv,
    stop: Option<oneshot::Sender<()>>,
    served: tokio::task::JoinHandle<Result<(), WebhookError>>,
}

impl Harness {
    /// The webhook against a simulated cluster.
    async fn start(cluster: Cluster) -> Self {
        Self::start_with(cluster, false).await
    }

    async fn start_with(cluster: Cluster, enable_http2: bool) -> Self {
        Self::start_on(Backend::Sim, cluster, enable_http2).await
    }

    /// The webhook against a cluster on `backend`, once its caches have listed, with nmo's
    /// requests counted from then.
    async fn start_on(backend: Backend, cluster: Cluster, enable_http2: bool) -> Self {
        let harness = Box::pin(Self::start_unsynced(backend, cluster, enable_http2, &[])).await;
        harness.wait_for_the_caches().await;
        harness.env.forget_operator_requests();
        harness
    }

    /// The webhook against the simulated cluster, with every `(verb, resource)` of `failing`
    /// failing (500) from before it starts.
    async fn start_failing(cluster: Cluster, failing: &[(&str, &str)]) -> Self {
        Box::pin(Self::start_unsynced(Backend::Sim, cluster, false, failing)).await
    }

    async fn start_unsynced(
        backend: Backend,
        cluster: Cluster,
        enable_http2: bool,
        failing: &[(&str, &str)],
    ) -> Self {
        let env = Box::pin(start_cluster(backend, cluster)).await;
        for (verb, resource) in failing {
            env.sim()
                .faults()
                .add(FaultRule::on(Some(verb), Some(resource)).errors(1.0, 500));
        }
        let client = env.operator_client();
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
            ..WebhookConfig::default()
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
            env,
            stop: Some(stop),
            served,
        }
    }

    /// Until the webhook answers from its caches: a CREATE for a node nobody has is denied
    /// for that, no longer with "try again".
    async fn wait_for_the_caches(&self) {
        let probe = admission(
            "CREATE",
            Some(maintenance("cache-probe", "no-such-node")),
            None,
        );
        eventually(
            "the webhook's caches to list",
            Duration::from_secs(20),
            async || {
                let response = self.review(probe.clone()).await;
                response["status"]["message"]
                    .as_str()
                    .is_some_and(|message| message.contains("no node with name no-such-node"))
            },
        )
        .await;
    }

    /// A TLS connection to the webhook, for a client that writes its request by hand.
    async fn connect(&self) -> tokio_rustls::client::TlsStream<TcpStream> {
        self.connect_trusting(&[]).await.unwrap()
    }

    /// A TLS connection to the webhook trusting `roots` (the harness CA when empty); the
    /// handshake's error when the server's certificate is not trusted.
    async fn connect_trusting(
        &self,
        roots: &[CertificateDer<'static>],
    ) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
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
        TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
    }

    /// How many requests the webhook made, of `verb` on `resource` (it runs as nmo: its
    /// requests are counted and authorized as nmo's).
    fn requests(&self, verb: &str, resource: &str) -> u64 {
        self.env
            .count_operator_requests(&Query::all().verb(verb).resource(resource))
    }

    /// The GETs and LISTs the webhook made (its caches' watches, which start once they have
    /// listed, not counted).
    fn lookups(&self) -> u64 {
        ["get", "list"]
            .iter()
            .map(|verb| self.env.count_operator_requests(&Query::all().verb(verb)))
            .sum()
    }

    /// Makes every `verb` on `resource` fail with a 500 from now on.
    fn fail(&self, verb: &str, resource: &str) {
        self.env
            .sim()
            .faults()
            .add(FaultRule::on(Some(verb), Some(resource)).errors(1.0, 500));
    }

    /// POSTs `body` to `path` on a new TLS connection trusting `roots` (the harness CA when
    /// empty). Returns the HTTP status, the body and the server's leaf certificate.
    async fn post_raw_trusting(
        &self,
        path: &str,
        body: String,
        roots: &[CertificateDer<'static>],
    ) -> Result<(StatusCode, Vec<u8>, CertificateDer<'static>), String> {
        let tls = self
            .connect_trusting(roots)
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

    /// Reviews the creation of NodeMaintenance `name` for `node_name` (as the test names them).
    async fn create(&self, name: &str, node_name: &str) -> Value {
        let (name, node_name) = (self.env.name(name), self.env.name(node_name));
        self.review(creation(&name, &node_name)).await
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
/// The AdmissionReview of creating the NodeMaintenance `name` of `node_name`, names as given.
fn creation(name: &str, node_name: &str) -> Value {
    admission("CREATE", Some(maintenance(name, node_name)), None)
}

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

/// Each review used to cost a GET of its node and a LIST of every NodeMaintenance: forged
/// CREATEs were a way to load the API server.
async fn create_for_an_existing_worker_is_allowed_without_any_request(backend: Backend) {
    let harness = Harness::start_on(
        backend,
        Cluster {
            nodes: vec![node("worker-1", &["node-role.kubernetes.io/worker"])],
            ..Default::default()
        },
        false,
    )
    .await;
    for n in 0..10 {
        assert_allowed(&harness.create(&format!("nm-{n}"), "worker-1").await);
    }
    assert_eq!(
        harness.lookups(),
        0,
        "reviews are answered from the caches, and a worker never costs a quorum lookup: {:?}",
        harness.env.operator_requests_report()
    );
    harness.stop().await;
}
both_backends!(create_for_an_existing_worker_is_allowed_without_any_request);

async fn create_for_a_missing_node_is_denied_naming_it(backend: Backend) {
    let harness = Harness::start_on(backend, one_worker(), false).await;
    let response = harness.create("nm-1", "worker-9").await;
    assert_denied(
        &response,
        &format!(
            "invalid nodeName, no node with name {} found",
            harness.env.name("worker-9")
        ),
    );
    let response = harness.create("nm-2", "").await;
    assert_denied(&response, "invalid nodeName, no node with name  found");
    harness.stop().await;
}
both_backends!(create_for_a_missing_node_is_denied_naming_it);

async fn a_second_maintenance_for_a_node_is_denied_even_while_the_first_is_deleted(
    backend: Backend,
) {
    let harness = Harness::start_on(
        backend,
        Cluster {
            nodes: vec![node("worker-1", &[]), node("worker-2", &[])],
            maintenances: vec![
                maintenance("first", "worker-1"),
                maintenance("old", "worker-2"),
            ],
            // Deleted, but its finalizer keeps it (its node is being restored).
            deleting: vec!["old"],
            ..Default::default()
        },
        false,
    )
    .await;
    let old = harness.env.maintenance("old").await.unwrap();
    assert!(!old["metadata"]["deletionTimestamp"].is_null(), "{old}");
    let exists = |node: &str| {
        format!(
            "invalid nodeName, a NodeMaintenance for node {} already exists",
            harness.env.name(node)
        )
    };
    assert_denied(
        &harness.create("second", "worker-1").await,
        &exists("worker-1"),
    );
    assert_denied(
        &harness.create("third", "worker-2").await,
        &exists("worker-2"),
    );
    harness.stop().await;
}
both_backends!(a_second_maintenance_for_a_node_is_denied_even_while_the_first_is_deleted);

async fn updates_may_change_anything_but_the_node_name(backend: Backend) {
    // The node is gone: an update (say, removing the finalizer) must still pass.
    let harness = Harness::start_on(backend, Cluster::default(), false).await;
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
    assert_eq!(
        harness.lookups(),
        0,
        "updates need no lookups: {:?}",
        harness.env.operator_requests_report()
    );
    harness.stop().await;
}
both_backends!(updates_may_change_anything_but_the_node_name);

async fn a_drain_timeout_that_is_not_a_go_duration_is_denied_on_create_and_update(
    backend: Backend,
) {
    let harness = Harness::start_on(backend, one_worker(), false).await;
    let with = |timeout: &str, policy: Option<&str>| {
        let mut nm = maintenance(&harness.env.name("nm-1"), &harness.env.name("worker-1"));
        nm["spec"]["drainTimeout"] = json!(timeout);
        if let Some(policy) = policy {
            nm["spec"]["onDrainTimeout"] = json!(policy);
        }
        nm
    };
    let denied = |response: &Value, text: &str| {
        assert_eq!(response["allowed"], false, "{response}");
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(text), "{text:?} not in {message:?}");
    };
    for bad in ["soon", "30", "1d"] {
        let response = harness
            .review(admission("CREATE", Some(with(bad, None)), None))
            .await;
        denied(&response, &format!("invalid spec.drainTimeout {bad:?}"));
        denied(&response, "such as 30m");
    }
    denied(
        &harness
            .review(admission("CREATE", Some(with("0s", None)), None))
            .await,
        "longer than zero",
    );
    denied(
        &harness
            .review(admission("CREATE", Some(with("30m", Some("Later"))), None))
            .await,
        "invalid spec.onDrainTimeout \"Later\"",
    );
    assert_allowed(
        &harness
            .review(admission("CREATE", Some(with("1h30m", Some("Undo"))), None))
            .await,
    );
    let old = with("30m", None);
    denied(
        &harness
            .review(admission(
                "UPDATE",
                Some(with("forever", None)),
                Some(old.clone()),
            ))
            .await,
        "invalid spec.drainTimeout \"forever\"",
    );
    assert_allowed(
        &harness
            .review(admission("UPDATE", Some(with("2h", None)), Some(old)))
            .await,
    );
    harness.stop().await;
}
both_backends!(a_drain_timeout_that_is_not_a_go_duration_is_denied_on_create_and_update);

async fn delete_is_allowed(backend: Backend) {
    let harness = Harness::start_on(backend, Cluster::default(), false).await;
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
both_backends!(delete_is_allowed);

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

/// Simulator only: the guard budget's status is the test's (a real cluster's disruption
/// controller computes its own from the guard pods).
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

/// Simulator only: the guard budget's status is the test's (a real cluster's disruption
/// controller computes its own from the guard pods).
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
    assert_eq!(harness.requests("list", "pods"), 2);
    harness.stop().await;
}

/// Simulator only: the guard budgets' status is the test's (a real cluster's disruption
/// controller computes its own from the guard pods).
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

/// Simulator only: the guard budget's status is the test's (a real cluster's disruption
/// controller computes its own from the guard pods).
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

async fn without_a_guard_a_second_control_plane_node_is_denied_naming_the_first(backend: Backend) {
    let mut cluster = openshift(Vec::new(), Vec::new());
    cluster.nodes.push(node("worker-1", &[]));
    cluster.maintenances = vec![
        maintenance("worker-upgrade", "worker-1"),
        maintenance("master-0-kernel", "master-0"),
    ];
    let harness = Harness::start_on(backend, cluster, false).await;
    let response = harness.create("master-1-kernel", "master-1").await;
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().unwrap();
    assert!(message.contains("master-0-kernel"), "{message}");
    assert!(message.contains("master-0"), "{message}");
    assert!(message.contains("master-1"), "{message}");
    harness.stop().await;
}
both_backends!(without_a_guard_a_second_control_plane_node_is_denied_naming_the_first);

async fn without_a_guard_one_control_plane_node_at_a_time_is_allowed(backend: Backend) {
    let mut cluster = openshift(Vec::new(), Vec::new());
    cluster.nodes.push(node("worker-1", &[]));
    cluster.maintenances = vec![maintenance("worker-upgrade", "worker-1")];
    let harness = Harness::start_on(backend, cluster, false).await;
    // Labelled with the pre-1.24 role only.
    assert_allowed(&harness.create("master-1-kernel", "master-1").await);
    harness.stop().await;
}
both_backends!(without_a_guard_one_control_plane_node_at_a_time_is_allowed);

// ---------------------------------------------------------------------------------------------
// Failures never allow by accident.

/// Simulator only: the failing lookups are injected (fault injection).
#[tokio::test]
async fn lookup_failures_deny_asking_to_try_again() {
    let mut cluster = openshift(Vec::new(), Vec::new());
    cluster.nodes.push(node("worker-1", &[]));
    cluster.maintenances = vec![maintenance("worker-upgrade", "worker-1")];
    let harness = Harness::start_on(Backend::Sim, cluster, false).await;
    harness.fail("list", "poddisruptionbudgets");
    let response = harness.create("nm-0", "master-0").await;
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().unwrap();
    assert!(message.ends_with("please try again"), "{message}");
    assert!(
        message.contains("(500)") && !message.contains("Status {"),
        "the API server's message, in one line: {message}"
    );
    harness.stop().await;
}

/// Simulator only (fault injection): caches that cannot list (nodes, or NodeMaintenances)
/// never let a CREATE through; it is denied, asking to try again.
#[tokio::test]
async fn until_its_caches_have_listed_the_webhook_denies_asking_to_try_again() {
    for failing in [("list", "nodes"), ("list", "nodemaintenances")] {
        let cluster = one_worker();
        let harness = Harness::start_failing(cluster, &[failing]).await;
        let response = harness.create("nm-0", "worker-1").await;
        assert_eq!(response["allowed"], false, "{failing:?}: {response}");
        let message = response["status"]["message"].as_str().unwrap();
        assert!(
            message.ends_with("please try again"),
            "{failing:?}: {message}"
        );
        harness.stop().await;
    }
}

/// Simulator only: the failing lookup is injected (fault injection).
#[tokio::test]
async fn guard_pod_lookup_failure_denies() {
    let cluster = openshift(
        vec![guard_pdb("etcd-guard-pdb", 0)],
        vec![guard_pod("master-0", false)],
    );
    let harness = Harness::start(cluster).await;
    harness.fail("list", "pods");
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

/// The HTTPS server's own behaviour, whatever the cluster: on the simulator only.
#[tokio::test]
async fn malformed_reviews_get_a_clean_400_and_the_server_keeps_serving() {
    let harness = Harness::start(one_worker()).await;
    let mut v1beta1 = creation("nm-1", "worker-1");
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

/// A cluster of one worker node, `worker-1`.
fn one_worker() -> Cluster {
    Cluster {
        nodes: vec![node("worker-1", &[])],
        ..Default::default()
    }
}

/// Writes a review's headers and `sent` bytes of its body on `stream`, promising all of it.
async fn start_review(
    stream: &mut tokio_rustls::client::TlsStream<TcpStream>,
    body: &str,
    sent: usize,
) {
    let head = format!(
        "POST {VALIDATE_PATH} HTTP/1.1\r\nHost: nmo-webhook.nmo-system.svc\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body.as_bytes()[..sent]).await.unwrap();
    stream.flush().await.unwrap();
}

/// The HTTPS server's own behaviour, whatever the cluster: on the simulator only. Clients
/// holding connections with half-sent bodies (more of them than reviews are decided at once)
/// keep no review waiting: not a CREATE, not an UPDATE such as nmo's own finalizer patches or a
/// person removing a finalizer by hand.
#[tokio::test]
async fn clients_trickling_their_bodies_keep_no_review_waiting() {
    let harness = Harness::start_on(Backend::Sim, one_worker(), false).await;
    let body = creation("nm-x", "worker-1").to_string();
    let mut stalled = Vec::new();
    for _ in 0..16 {
        let mut stream = harness.connect().await;
        start_review(&mut stream, &body, body.len() / 2).await;
        stalled.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = std::time::Instant::now();
    assert_allowed(&harness.create("nm-1", "worker-1").await);
    let old = maintenance("nm-2", "worker-1");
    let mut no_finalizer = old.clone();
    no_finalizer["metadata"]["finalizers"] = json!([]);
    assert_allowed(
        &harness
            .review(admission("UPDATE", Some(no_finalizer), Some(old)))
            .await,
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the reviews waited {:?} behind the stalled clients",
        started.elapsed()
    );
    drop(stalled);
    harness.stop().await;
}

/// The HTTPS server's own behaviour (simulator only: the slow API is injected). A client whose
/// body comes late, with an API server that answers slowly: the webhook still answers well
/// inside the API server's 10 s timeout (`timeoutSeconds`), so the user reads nmo's answer.
#[tokio::test]
async fn every_review_is_answered_inside_the_api_servers_timeout() {
    let harness = Harness::start_on(Backend::Sim, one_worker(), false).await;
    for (verb, resource) in [("get", "nodes"), ("list", "nodemaintenances")] {
        harness
            .env
            .sim()
            .faults()
            .add(FaultRule::on(Some(verb), Some(resource)).latency(Duration::from_secs(30)));
    }
    let body = creation("nm-1", "worker-1").to_string();
    let mut stream = harness.connect().await;
    let started = std::time::Instant::now();
    start_review(&mut stream, &body, 10).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let _ = stream.write_all(&body.as_bytes()[10..]).await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), async {
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    answer.extend_from_slice(&buffer[..n]);
                    if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no answer at all");
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "answered after {:?}: {}",
        started.elapsed(),
        String::from_utf8_lossy(&answer)
    );
    harness.stop().await;
}

// ---------------------------------------------------------------------------------------------
// TLS: certificate rotation, HTTP/2, startup errors.

/// The HTTPS server's own behaviour, whatever the cluster: on the simulator only.
#[tokio::test]
async fn a_rotated_certificate_is_served_without_a_restart() {
    let harness = Harness::start(one_worker()).await;
    let review = creation("nm-1", "worker-1").to_string();
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
    let review = creation("nm-1", "worker-9");
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

/// The HTTPS server's own behaviour, whatever the cluster: on the simulator only.
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

/// A kube client for tests in which the webhook never reaches the cluster.
fn unused_client() -> kube::Client {
    kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap()
}

#[tokio::test]
async fn cert_manager_file_names_are_accepted() {
    let client = unused_client();
    let ca = Ca::new("cert-manager CA");
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = ca.serving(7);
    write_pair(dir.path(), "tls.crt", "tls.key", &cert, &key);
    let config = WebhookConfig {
        port: 0,
        cert_dir: dir.path().to_path_buf(),
        enable_http2: false,
        ..WebhookConfig::default()
    };
    let webhook = Webhook::bind(&config, "127.0.0.1:0".parse().unwrap(), client).await;
    assert!(webhook.is_ok(), "{:?}", webhook.err());
}

#[tokio::test]
async fn a_missing_certificate_fails_startup_naming_the_path() {
    let client = unused_client();
    let dir = tempfile::tempdir().unwrap();
    let config = WebhookConfig {
        port: 9443,
        cert_dir: dir.path().join("certificates"),
        enable_http2: false,
        ..WebhookConfig::default()
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
    let client = unused_client();
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

// ---------------------------------------------------------------------------------------------
// The webhook configuration (deploy/webhook), on a real API server.

/// On a real API server: deploy/webhook's configuration, pointed at a webhook that cannot be
/// reached, with `failurePolicy: Fail` (what nmo sets once its certificate is trusted), for
/// this test's objects only. A change of the spec is
/// refused ("failed calling webhook"); a change of metadata alone (the finalizer list, a
/// label) is not sent to the webhook at all and goes through: nmo's own finalizer patches and
/// a person's emergency finalizer removal never depend on the webhook answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_of_metadata_alone_never_wait_on_the_webhook() {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    use kube::Api;
    use kube::api::{DeleteParams, Patch, PatchParams, PostParams};

    let env = TestEnv::on(Backend::Real).start_idle().await;
    let admin = env.admin_client();
    let label = env.name("webhook-scope");
    let name = env.name("nm-metadata");
    let mut nm = maintenance(&name, "worker-1");
    nm["metadata"]["labels"] = json!({ "nmo-test": label });
    let maintenances = Api::<NodeMaintenance>::all(admin.clone());
    maintenances
        .create(&PostParams::default(), &serde_json::from_value(nm).unwrap())
        .await
        .expect("created before the webhook is registered");

    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/webhook/validatingwebhookconfiguration.yaml");
    let mut configuration: Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let configuration_name = env.name("nmo-unreachable-webhook");
    configuration["metadata"]["name"] = json!(configuration_name);
    let webhook = &mut configuration["webhooks"][0];
    webhook["clientConfig"] = json!({"url": format!("https://127.0.0.1:9{VALIDATE_PATH}")});
    webhook["objectSelector"] = json!({"matchLabels": {"nmo-test": label}});
    webhook["timeoutSeconds"] = json!(2);
    // As nmo sets it once its certificate is trusted (the file ships Ignore until then).
    webhook["failurePolicy"] = json!("Fail");
    let configurations = Api::<ValidatingWebhookConfiguration>::all(admin.clone());
    configurations
        .create(
            &PostParams::default(),
            &serde_json::from_value(configuration).unwrap(),
        )
        .await
        .expect("the webhook configuration is accepted");

    let patch = |body: Value| {
        let maintenances = maintenances.clone();
        let name = name.clone();
        async move {
            maintenances
                .patch(&name, &PatchParams::default(), &Patch::Merge(body))
                .await
        }
    };
    // The API server learns of a new webhook configuration from its own watch; on a loaded
    // machine (CI's two cores, every test's control plane at once) that took over 20 s.
    eventually(
        "the webhook to be called",
        Duration::from_secs(60),
        async || {
            patch(json!({"spec": {"reason": "changed"}}))
                .await
                .is_err_and(|error| error.to_string().contains("failed calling webhook"))
        },
    )
    .await;
    let finalizers = patch(json!({"metadata": {"finalizers": null}})).await;
    let labels = patch(json!({"metadata": {"labels": {"touched": "yes"}}})).await;

    configurations
        .delete(&configuration_name, &DeleteParams::default())
        .await
        .expect("the webhook configuration is deleted");
    let _ = maintenances.delete(&name, &DeleteParams::default()).await;
    finalizers.expect("the finalizer is removed without the webhook");
    labels.expect("a label is added without the webhook");
}
