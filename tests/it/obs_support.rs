//! Shared by the observability tests: the actors driven by the in-memory fake cluster the way
//! `nmo run` drives them (a feeder plays the NodeMaintenance watch), a drain that a
//! PodDisruptionBudget holds up for a while, and bare HTTP/1.1 GETs, plain and over TLS.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use chrono::Utc;
use hyper_util::rt::TokioIo;
use nmo_actors::config::Config;
use nmo_actors::fake::{FakeCluster, Harness};
use nmo_actors::model::Phase;
use nmo_actors::observe::Observer;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::support::eventually;

pub const NODE: &str = "worker-1";
pub const NS: &str = "app";
pub const PDB: &str = "db";
/// The pod the budget blocks at first.
pub const BLOCKED: &str = "db-0";
/// Every pod on the node; all are evicted.
pub const PODS: [&str; 3] = ["web-0", "web-1", BLOCKED];
/// How many refused evictions of the blocked pod the drain waits for before the budget opens.
pub const REFUSALS: usize = 2;

/// The actor system fed by a fake cluster's NodeMaintenance changes (the actors' own test
/// harness, in real time).
pub struct FakeOperator(Harness);

impl FakeOperator {
    /// Starts the actors with short timers (real time: the tests talk TCP) and `observer`.
    pub async fn start(cluster: FakeCluster, observer: Arc<dyn Observer>) -> FakeOperator {
        let config = Config {
            actor_name_prefix: None,
            retry_interval: Duration::from_millis(100),
            backoff_base: Duration::from_millis(40),
            backoff_max: Duration::from_millis(200),
            observer,
            ..Config::default()
        };
        FakeOperator(Harness::start(&cluster, config).await.unwrap())
    }

    /// Stops every actor (their spans end with them).
    pub async fn stop(self) {
        self.0.stop().await;
    }
}

/// A node with three pods; the budget `db` refuses evicting `db-0` until opened.
pub fn cluster_with_guarded_pod() -> FakeCluster {
    let cluster = FakeCluster::new();
    cluster.add_node(NODE);
    for pod in PODS {
        cluster.add_pod(NODE, NS, pod);
    }
    cluster.add_pdb(NS, PDB, &[BLOCKED], 0);
    cluster
}

/// How long the observability tests wait for what the actors do on the fake cluster.
pub const WAIT: Duration = Duration::from_secs(10);

/// Evictions of the blocked pod attempted so far.
pub fn blocked_attempts(cluster: &FakeCluster) -> usize {
    cluster.count_calls(&format!("evict_pod {NS}/{BLOCKED}"))
}

/// Puts the node into maintenance through `name`; the budget refuses [`REFUSALS`] evictions,
/// then opens; returns once the maintenance Succeeded.
pub async fn drain_through_the_pdb(cluster: &FakeCluster, name: &str) {
    cluster.create_maintenance(name, NODE, Utc::now());
    eventually("the budget to refuse evictions", WAIT, async || {
        blocked_attempts(cluster) >= REFUSALS
    })
    .await;
    cluster.set_pdb_allowed(NS, PDB, 1);
    eventually("phase Succeeded", WAIT, async || {
        cluster.status(name).phase == Some(Phase::Succeeded)
    })
    .await;
}

/// Deletes the NodeMaintenance and waits until its finalizer is released (undo done).
pub async fn end_maintenance(cluster: &FakeCluster, name: &str) {
    cluster.delete_maintenance(name);
    eventually("the NodeMaintenance to be gone", WAIT, async || {
        cluster.maintenance(name).is_none()
    })
    .await;
}

/// A plain HTTP/1.1 GET: (status code, body).
pub async fn http_get(address: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, body.to_string())
}

/// Accepts any server certificate: for the self-signed one, which no CA vouches for.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// GET `/metrics` over HTTPS with `token`, trusting `root` (any certificate without one): the
/// status and the body.
pub async fn https_get(
    address: SocketAddr,
    token: Option<&str>,
    root: Option<CertificateDer<'static>>,
) -> (u16, String) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .expect("TLS versions");
    let config = match root {
        Some(root) => {
            let mut roots = RootCertStore::empty();
            roots.add(root).expect("a root");
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth(),
    };
    let tcp = TcpStream::connect(address).await.expect("connects");
    let tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").expect("a name"), tcp)
        .await
        .expect("a TLS handshake");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("an HTTP connection");
    tokio::spawn(connection);
    let mut request = Request::get("/metrics").header("host", "localhost");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let response = sender
        .send_request(request.body(Body::empty()).expect("a request"))
        .await
        .expect("a response");
    let status = response.status().as_u16();
    let body = axum::body::to_bytes(Body::new(response.into_body()), usize::MAX)
        .await
        .expect("a body");
    (status, String::from_utf8_lossy(&body).into_owned())
}
