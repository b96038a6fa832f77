//! Secure metrics (`--metrics-secure`, the default): HTTPS, and a bearer token the API server
//! authenticates (TokenReview) and authorizes for `get /metrics` (SubjectAccessReview), with
//! nmo running as its service account under deploy/base's RBAC. The verdicts come from a real
//! API server; that the endpoint is HTTPS with a self-signed certificate by default, and 401
//! without a token, needs none.

use std::net::SocketAddr;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use nmo::observability::registry::Metrics;
use nmo::operator::OperatorOptions;
use nmo::servers::{Probes, Servers};
use serde_json::json;

use crate::obs_support::https_get;
use crate::support::{Backend, TestEnv, test_options};

/// A port free a moment ago, on loopback.
fn free_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
}

/// nmo's servers with only the metrics one on, on `address`, its client nmo's.
async fn metrics_server(env: &TestEnv, options: OperatorOptions) -> Servers {
    let (metrics, client) = Metrics::for_client(env.operator_client().into());
    Servers::start(&options, &metrics, &Probes::default(), &client)
        .await
        .expect("the metrics server starts")
}

fn options(address: SocketAddr) -> OperatorOptions {
    OperatorOptions {
        metrics_bind_address: address.to_string(),
        ..test_options()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_https_with_a_self_signed_certificate_and_refuse_anonymous_scrapes() {
    let env = TestEnv::on(Backend::Sim).start_idle().await;
    let address = free_port();
    let servers = metrics_server(&env, options(address)).await;
    let (status, body) = https_get(address, None, None).await;
    assert_eq!(status, 401, "{body}");
    servers.stop();

    let plain_at = free_port();
    let plain = metrics_server(
        &env,
        OperatorOptions {
            metrics_secure: false,
            ..options(plain_at)
        },
    )
    .await;
    let (status, body) = crate::obs_support::http_get(plain_at, "/metrics").await;
    assert_eq!(
        status, 200,
        "--metrics-secure=false is plain HTTP for anyone"
    );
    assert!(body.contains("nmo_build_info"), "{body}");
    plain.stop();
}

/// A token for a new ServiceAccount `name` in `namespace`, from the TokenRequest API.
async fn token_for(env: &TestEnv, namespace: &str, name: &str) -> String {
    let accounts = Api::<ServiceAccount>::namespaced(env.admin_client(), namespace);
    let account = serde_json::from_value(json!({"metadata": {"name": name}})).expect("an account");
    accounts
        .create(&PostParams::default(), &account)
        .await
        .expect("the account is created");
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let issued: TokenRequest = accounts
        .create_subresource("token", name, &PostParams::default(), &request)
        .await
        .expect("a token is issued");
    issued.status.expect("a token").token
}

/// On the real API server: no token 401, a token the server does not know 401, a token
/// without the right 403, the token of an account bound to nmo-metrics-reader 200 with the
/// metrics. The certificate comes from `--metrics-cert-path` (signed by a CA the client trusts).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_token_allowed_by_the_metrics_reader_role_reads_the_metrics() {
    let env = TestEnv::on(Backend::Real)
        .namespace("scrapers")
        .start_idle()
        .await;
    let namespace = env.ns("scrapers");
    let reader = token_for(&env, &namespace, "prometheus").await;
    let stranger = token_for(&env, &namespace, "stranger").await;
    let binding_name = env.name("nmo-metrics-reader");
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": binding_name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "nmo-metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": namespace}],
    }))
    .expect("a binding");
    let bindings = Api::<ClusterRoleBinding>::all(env.admin_client());
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .expect("the binding is created");

    let ca = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("a cert");
    let certs = tempfile::tempdir().expect("a directory");
    std::fs::write(certs.path().join("serving.pem"), ca.cert.pem()).expect("written");
    std::fs::write(
        certs.path().join("serving.key"),
        ca.signing_key.serialize_pem(),
    )
    .expect("written");
    let root = ca.cert.der().clone();
    let address = free_port();
    let servers = metrics_server(
        &env,
        OperatorOptions {
            metrics_cert_path: Some(certs.path().to_path_buf()),
            metrics_cert_name: "serving.pem".into(),
            metrics_cert_key: "serving.key".into(),
            ..options(address)
        },
    )
    .await;

    let trusted = Some(root);
    let get = async |token: Option<&str>| https_get(address, token, trusted.clone()).await;
    assert_eq!(get(None).await.0, 401, "no token");
    assert_eq!(get(Some("made-up")).await.0, 401, "an unknown token");
    let (status, body) = get(Some(&stranger)).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains(&format!("system:serviceaccount:{namespace}:stranger")),
        "{body}"
    );
    let (status, body) = get(Some(&reader)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("nmo_build_info"), "{body}");

    servers.stop();
    bindings
        .delete(&binding_name, &DeleteParams::default())
        .await
        .expect("the binding is deleted");
}
