//! The Go operator running beside nmo (its leader election lease `135b1886.medik8s.io` renewed
//! in a namespace of its own, as controller-runtime does): nmo drives no node while it runs,
//! says so in an event and in `/readyz`, and resumes by itself once it is gone, whether it was
//! there first or came while nmo drove nodes.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::support::{Backend, TestEnv, both_backends, eventually, test_options};

/// controller-runtime's identity: the pod's host name and a UUID.
const GO_HOLDER: &str = "node-maintenance-operator-controller-manager-6c8f9d-x7k2p_1b4e28ba-2fa1-11d2-883f-0016d3cca427";
const CRD: &str = "nodemaintenances.nodemaintenance.medik8s.io";
/// How long the stand-in's lease is valid after a renewal (controller-runtime's is 15 s; shorter
/// here so that its going is seen sooner).
const LEASE_SECONDS: i64 = 3;

/// The Go operator's leader election: its lease renewed every second until stopped.
struct GoOperator {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl GoOperator {
    fn start(admin: kube::Client, namespace: String) -> GoOperator {
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let leases: Api<Lease> = Api::namespaced(admin, &namespace);
            loop {
                let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
                let lease = json!({
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": nmo::leader::LEADER_ELECTION_ID},
                    "spec": {
                        "holderIdentity": GO_HOLDER,
                        "leaseDurationSeconds": LEASE_SECONDS,
                        "renewTime": now,
                    },
                });
                let params = PatchParams::apply("go-operator").force();
                let _ = leases
                    .patch(
                        nmo::leader::LEADER_ELECTION_ID,
                        &params,
                        &Patch::Apply(&lease),
                    )
                    .await;
                tokio::select! {
                    _ = &mut stopped => return,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        });
        GoOperator {
            stop: Some(stop),
            task,
        }
    }

    /// Stops renewing (the Go operator is gone; its lease stays, as a killed one leaves it).
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

/// `/readyz`'s status and body; 0 while nmo does not serve yet.
async fn readyz(probes: std::net::SocketAddr) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(probes).await else {
        return (0, String::new());
    };
    let request = format!("GET /readyz HTTP/1.1\r\nHost: {probes}\r\nConnection: close\r\n\r\n");
    let mut response = String::new();
    if stream.write_all(request.as_bytes()).await.is_err()
        || stream.read_to_string(&mut response).await.is_err()
    {
        return (0, String::new());
    }
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    (status, body)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// The reasons of the events about the NodeMaintenance CRD.
async fn crd_event_reasons(env: &TestEnv) -> Vec<String> {
    env.event_reasons_as_named(CRD).await
}

/// nmo's marks on `node` stay as they were for a while. Only nmo's marks are compared: on the
/// real API server the controllers taint and label a node without a kubelet meanwhile (the
/// node lifecycle controller's taints, the `beta.kubernetes.io/*` labels).
async fn untouched_for_a_while(env: &TestEnv, node: &str) {
    let before = nmo_marks(&env.node(node).await);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after = nmo_marks(&env.node(node).await);
    assert_eq!(after, before, "{node} is not driven");
}

/// What nmo writes on a node: the cordon, its two taints and its label.
fn nmo_marks(
    node: &serde_json::Value,
) -> (serde_json::Value, Vec<serde_json::Value>, serde_json::Value) {
    let taints = node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|taint| {
            let key = taint["key"].as_str().unwrap_or_default();
            key == "medik8s.io/drain" || key == "node.kubernetes.io/unschedulable"
        })
        .cloned()
        .collect();
    (
        node["spec"]["unschedulable"].clone(),
        taints,
        node["metadata"]["labels"]["remediation.medik8s.io/exclude-from-remediation"].clone(),
    )
}

async fn nmo_drives_no_node_while_the_go_operator_runs(backend: Backend) {
    let env = TestEnv::on(backend)
        // Three nodes and no budgets: both drains finish at once.
        .nodes(3, 2)
        .namespace("go-operator")
        .start_idle()
        .await;
    let go = GoOperator::start(env.admin_client(), env.ns("go-operator"));
    let probes = std::net::SocketAddr::from(([127, 0, 0, 1], free_port()));
    let options = nmo::operator::OperatorOptions {
        go_operator_check_interval: Duration::from_secs(1),
        health_probe_bind_address: probes.to_string(),
        ..test_options()
    };
    let nmo = env.start_another_operator(options);

    // There first: nmo never starts driving.
    env.create_maintenance("nm-0", "node-0").await;
    eventually(
        "/readyz to say why nmo waits",
        Duration::from_secs(20),
        async || {
            let (status, body) = readyz(probes).await;
            if status == 200 && body.contains("paused: the Go Node Maintenance Operator runs") {
                Ok(())
            } else {
                Err(format!("{status} {body}"))
            }
        },
    )
    .await;
    let (_, body) = readyz(probes).await;
    assert!(
        body.contains(&env.ns("go-operator")) && body.contains(GO_HOLDER),
        "{body}"
    );
    untouched_for_a_while(&env, "node-0").await;
    assert!(env.lease("node-0").await.is_none(), "no node lease taken");
    assert!(
        crd_event_reasons(&env)
            .await
            .contains(&"GoOperatorRunning".to_string()),
        "{:?}",
        crd_event_reasons(&env).await
    );

    // Gone: nmo resumes by itself.
    go.stop().await;
    env.wait_succeeded("nm-0").await;
    assert_eq!(env.node("node-0").await["spec"]["unschedulable"], true);
    let (status, body) = readyz(probes).await;
    assert!(status == 200 && !body.contains("paused"), "{status} {body}");
    assert!(
        crd_event_reasons(&env)
            .await
            .contains(&"GoOperatorGone".to_string())
    );

    // Back while nmo drives nodes: nmo stops driving (a new maintenance waits) and resumes again.
    let go = GoOperator::start(env.admin_client(), env.ns("go-operator"));
    eventually("nmo to pause again", Duration::from_secs(20), async || {
        readyz(probes).await.1.contains("paused")
    })
    .await;
    env.create_maintenance("nm-1", "node-1").await;
    untouched_for_a_while(&env, "node-1").await;
    assert_eq!(
        env.node("node-0").await["spec"]["unschedulable"],
        true,
        "the maintenance under way is left as it is"
    );
    go.stop().await;
    env.wait_succeeded("nm-1").await;
    nmo.stop().await.expect("clean stop");
}

both_backends!(nmo_drives_no_node_while_the_go_operator_runs);
