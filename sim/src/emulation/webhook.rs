//! An admission webhook of the emulations' own: an HTTPS server on loopback (a throwaway CA
//! signs its certificate for 127.0.0.1) answering AdmissionReviews of `pods/eviction` with the
//! reviewer given, and its ValidatingWebhookConfiguration, registered by URL with the API server
//! (the simulator or a real kube-apiserver), as an out-of-cluster webhook is.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::api::{Api, DeleteParams, PostParams};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::EmulationError;

/// The label of every webhook configuration an emulation registers (test harnesses sweep
/// what a failed test left by it).
pub const LABEL: &str = "nmo-sim.emulation/webhook";

/// What a reviewer answers: allowed, or refused with an HTTP code and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Let the request through (to the budget).
    Allow,
    /// Refuse it with this code and message.
    Deny(u16, String),
}

/// An eviction as a webhook sees it: the pod's namespace and name, and the uid the request's
/// precondition names (None without one).
#[derive(Debug, Clone)]
pub struct Eviction {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// `deleteOptions.preconditions.uid`.
    pub uid: Option<String>,
}

type Reviewer =
    Arc<dyn Fn(Eviction) -> Pin<Box<dyn Future<Output = Verdict> + Send>> + Send + Sync>;

/// A running webhook server; stopped when dropped.
pub struct WebhookServer {
    addr: SocketAddr,
    ca_pem: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A CA and a serving certificate for 127.0.0.1 it signs: (CA PEM, chain, key).
fn certificates()
-> Result<(String, Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), rcgen::Error> {
    let ca_key = rcgen::KeyPair::generate()?;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca_params.distinguished_name.push(
        rcgen::DnType::CommonName,
        "nmo-sim emulated eviction webhooks",
    );
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let ca = ca_params.self_signed(&ca_key)?;
    let key = rcgen::KeyPair::generate()?;
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])?;
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let serving = params.signed_by(&key, &issuer)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    Ok((ca.pem(), vec![serving.der().clone()], key))
}

/// The eviction an AdmissionReview carries.
fn eviction_of(review: &Value) -> Option<Eviction> {
    let request = &review["request"];
    let object = &request["object"];
    let name = object["metadata"]["name"]
        .as_str()
        .or_else(|| request["name"].as_str())?;
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .or_else(|| request["namespace"].as_str())?;
    let uid = object["deleteOptions"]["preconditions"]["uid"]
        .as_str()
        .map(str::to_string);
    Some(Eviction {
        namespace: namespace.to_string(),
        name: name.to_string(),
        uid,
    })
}

fn response(review: &Value, verdict: Verdict) -> Value {
    let uid = review["request"]["uid"].clone();
    let response = match verdict {
        Verdict::Allow => json!({"uid": uid, "allowed": true}),
        Verdict::Deny(code, message) => json!({
            "uid": uid, "allowed": false,
            "status": {"code": code, "message": message, "status": "Failure"}
        }),
    };
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

/// Answers one request: the review's verdict, or "allowed" for anything else.
async fn answer(
    reviewer: Reviewer,
    request: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, hyper::Error> {
    let body = request.into_body().collect().await?.to_bytes();
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let verdict = match eviction_of(&review) {
        Some(eviction) => reviewer(eviction).await,
        None => Verdict::Allow,
    };
    let answer = serde_json::to_vec(&response(&review, verdict)).unwrap_or_default();
    let mut response = hyper::Response::new(Full::new(Bytes::from(answer)));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

impl WebhookServer {
    /// Serves `reviewer` on a free loopback port.
    pub async fn start<F, Fut>(reviewer: F) -> Result<Self, EmulationError>
    where
        F: Fn(Eviction) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Verdict> + Send + 'static,
    {
        let reviewer: Reviewer = Arc::new(move |eviction| Box::pin(reviewer(eviction)));
        let (ca_pem, chain, key) = certificates()?;
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, reviewer) = (acceptor.clone(), reviewer.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = service_fn(move |request| answer(reviewer.clone(), request));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        Ok(WebhookServer { addr, ca_pem, task })
    }

    /// Registers the server as the validating webhook `webhook` on `pods/eviction`, in the
    /// configuration `configuration` (replacing one of that name), with KubeVirt's and the
    /// Drain Cleaner's `failurePolicy: Ignore`.
    pub async fn register(
        &self,
        client: &kube::Client,
        configuration: &str,
        webhook: &str,
    ) -> Result<(), EmulationError> {
        let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
        let _ = api.delete(configuration, &DeleteParams::default()).await;
        let mut object: ValidatingWebhookConfiguration = serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": configuration, "labels": {LABEL: "eviction"}},
            "webhooks": [{
                "name": webhook,
                "clientConfig": {"url": format!("https://{}/review", self.addr)},
                "rules": [{
                    "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                    "resources": ["pods/eviction"], "scope": "Namespaced"
                }],
                "failurePolicy": "Ignore",
                "sideEffects": "NoneOnDryRun",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 5
            }]
        }))?;
        if let Some(hook) = object.webhooks.as_mut().and_then(|w| w.first_mut()) {
            hook.client_config.ca_bundle = Some(ByteString(self.ca_pem.clone().into_bytes()));
        }
        api.create(&PostParams::default(), &object).await?;
        Ok(())
    }
}

/// Deletes the webhook configuration (the API server stops calling the server).
pub async fn unregister(client: &kube::Client, configuration: &str) {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let _ = api.delete(configuration, &DeleteParams::default()).await;
}
