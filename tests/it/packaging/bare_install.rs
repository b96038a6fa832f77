//! The default install on a bare cluster (no cert-manager, no OLM), on a real kube-apiserver:
//! `kubectl apply -f install.yaml` applies every object, a NodeMaintenance created before nmo
//! runs is let through (the webhook's certificate is not there yet, and that is no reason to
//! refuse it), and once nmo runs (as its ServiceAccount, with the install's RBAC) it makes its
//! certificate, publishes the CA, turns the webhook to fail closed, and the API server's
//! admission calls reach nmo's webhook through the Service: a NodeMaintenance for a missing
//! node is refused with the webhook's message, one for a real node admitted.
//!
//! There is no kube-proxy or cluster DNS here, so the API server reaches the Service through
//! its egress selector: its `cluster` traffic (webhooks included) goes through an HTTP CONNECT
//! proxy of this test, on a Unix socket, that forwards every tunnel to nmo's webhook port on
//! loopback. The TLS
//! handshake is still the API server's own, for the Service's name, against the caBundle.

use crate::support::assert_success;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use nmo::crd::NodeMaintenance;
use nmo_envtest::{Component, ControlPlane, Identity, Options};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener};

use super::support::repo;

/// Accepts HTTP CONNECT tunnels and joins each to `target`, whatever host it names.
async fn connect_proxy(listener: UnixListener, target: std::net::SocketAddr) {
    while let Ok((mut inbound, _)) = listener.accept().await {
        tokio::spawn(async move {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
                if inbound.read(&mut byte).await.unwrap_or(0) == 0 {
                    return;
                }
                head.push(byte[0]);
            }
            let Ok(mut outbound) = TcpStream::connect(target).await else {
                let _ = inbound.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
                return;
            };
            if inbound
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
                .is_ok()
            {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn maintenance(name: &str, node: &str) -> NodeMaintenance {
    serde_json::from_value(json!({
        "apiVersion": "nodemaintenance.medik8s.io/v1beta1",
        "kind": "NodeMaintenance",
        "metadata": {"name": name},
        "spec": {"nodeName": node},
    }))
    .expect("a NodeMaintenance")
}

async fn webhook_state(admin: &kube::Client) -> (String, bool) {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
    let configuration = api.get("nmo-validating-webhook").await.expect("installed");
    let webhook = &configuration.webhooks.unwrap_or_default()[0];
    (
        webhook.failure_policy.clone().unwrap_or_default(),
        webhook.client_config.ca_bundle.is_some(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_install_works_on_a_bare_cluster_through_nmo_s_own_certificate() {
    let webhook_port = free_port();
    let egress = tempfile::tempdir().expect("a directory");
    let socket = egress.path().join("proxy.sock");
    let proxy = UnixListener::bind(&socket).expect("a socket");
    let egress_file = egress.path().join("egress.yaml");
    std::fs::write(
        &egress_file,
        format!(
            "apiVersion: apiserver.k8s.io/v1beta1\nkind: EgressSelectorConfiguration\negressSelections:\n- name: cluster\n  connection:\n    proxyProtocol: HTTPConnect\n    transport:\n      uds:\n        udsName: {}\n",
            socket.display()
        ),
    )
    .expect("writable");
    let options = Options {
        extra_args: vec![(
            Component::ApiServer,
            format!("--egress-selector-config-file={}", egress_file.display()),
        )],
        ..Options::api_only()
    };
    let plane = ControlPlane::start(options).expect("a control plane of its own");
    tokio::spawn(connect_proxy(
        proxy,
        std::net::SocketAddr::from(([127, 0, 0, 1], webhook_port)),
    ));

    let apply = plane
        .kubectl(&Identity::admin())
        .expect("kubectl")
        .current_dir(repo())
        .args(["apply", "-f", "install.yaml"])
        .output()
        .expect("kubectl runs");
    assert_success(&apply, "install.yaml does not apply to a bare cluster");
    let established = plane
        .kubectl(&Identity::admin())
        .expect("kubectl")
        .args([
            "wait",
            "--for=condition=Established",
            "crd/nodemaintenances.nodemaintenance.medik8s.io",
            "--timeout=30s",
        ])
        .status()
        .expect("kubectl runs");
    assert!(established.success());

    let admin = plane.admin_client().expect("an admin client");
    let maintenances: Api<NodeMaintenance> = Api::all(admin.clone());
    // Before nmo runs: nothing trusts a certificate yet, and nothing is refused for it.
    assert_eq!(webhook_state(&admin).await, ("Ignore".to_string(), false));
    maintenances
        .create(
            &PostParams::default(),
            &maintenance("early", "no-such-node"),
        )
        .await
        .expect("admitted while nmo's certificate is not there yet");
    maintenances
        .delete("early", &Default::default())
        .await
        .expect("deleted");

    // nmo as the install runs it: its ServiceAccount, the install's flags for the webhook.
    let client = plane
        .client_as(&Identity::service_account("nmo-system", "nmo"))
        .expect("nmo's client");
    let options = nmo::operator::OperatorOptions {
        webhook_port,
        webhook_cert_secret: "nmo-webhook-cert".into(),
        pod_namespace: Some("nmo-system".into()),
        metrics_bind_address: "0".into(),
        health_probe_bind_address: "0".into(),
        ..nmo::operator::OperatorOptions::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let operator = tokio::spawn(nmo::operator::run(client, options, async move {
        let _ = stopped.await;
    }));

    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while webhook_state(&admin).await != ("Fail".to_string(), true) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "nmo did not publish its CA and turn the webhook to Fail: {:?}",
            webhook_state(&admin).await
        );
        assert!(!operator.is_finished(), "nmo stopped: {:?}", operator.await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The API server calls nmo's webhook, trusting nmo's CA for the Service's name.
    let refused = maintenances
        .create(
            &PostParams::default(),
            &maintenance("ghost", "no-such-node"),
        )
        .await
        .expect_err("the webhook refuses a missing node");
    assert!(
        refused
            .to_string()
            .contains("invalid nodeName, no node with name no-such-node found"),
        "{refused}"
    );
    let nodes: Api<Node> = Api::all(admin.clone());
    let node: Node =
        serde_json::from_value(json!({"metadata": {"name": "worker-1"}})).expect("a node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("a node");
    maintenances
        .create(&PostParams::default(), &maintenance("real", "worker-1"))
        .await
        .expect("admitted through the webhook");

    let _ = stop.send(());
    let outcome = tokio::time::timeout(Duration::from_secs(30), operator)
        .await
        .expect("nmo stops");
    assert!(matches!(outcome, Ok(Ok(()))), "{outcome:?}");
}

/// A LEASE_NAMESPACE changed without its Role: nmo, as the install's ServiceAccount, refuses to
/// start at once and names what is missing and where, instead of answering every lease call
/// with a 403 for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_namespace_without_its_role_stops_nmo_at_start_naming_what_is_missing() {
    let plane = ControlPlane::start(Options::api_only()).expect("a control plane of its own");
    let apply = plane
        .kubectl(&Identity::admin())
        .expect("kubectl")
        .current_dir(repo())
        .args(["apply", "-k", "deploy/install-no-webhook"])
        .output()
        .expect("kubectl runs");
    assert_success(&apply, "kubectl apply -k deploy/install-no-webhook");
    let client = plane
        .client_as(&Identity::service_account("nmo-system", "nmo"))
        .expect("nmo's client");
    let options = nmo::operator::OperatorOptions {
        lease_namespace: "my-leases".into(),
        metrics_bind_address: "0".into(),
        health_probe_bind_address: "0".into(),
        ..nmo::operator::OperatorOptions::default()
    };
    let outcome = tokio::time::timeout(
        Duration::from_secs(30),
        nmo::operator::run(client, options, std::future::pending()),
    )
    .await
    .expect("nmo stops at start instead of retrying for ever");
    let Err(error) = outcome else {
        panic!("nmo ran without rights on its leases");
    };
    let text = error.to_string();
    for missing in ["get", "create", "update", "delete", "list"] {
        assert!(
            text.contains(&format!(
                "{missing} leases (coordination.k8s.io) in namespace my-leases"
            )),
            "{text}"
        );
    }
    assert!(
        !text.contains("cluster wide"),
        "only the leases are missing: {text}"
    );
}
