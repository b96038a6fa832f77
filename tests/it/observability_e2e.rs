//! nmo end to end against the simulated API server, observed from outside: the traces it
//! exports over OTLP/gRPC, `/metrics`, and the probes, for one drain held up by a
//! PodDisruptionBudget and the end of that maintenance.

use std::time::Duration;

use nmo::observability::telemetry;
use nmo::operator::OperatorOptions;
use nmo_sim::{ClientOptions, Scenario, SimConfig, SimHandle, Simulator};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;

use crate::metrics::{sample, value};
use crate::obs_support::{eventually, http_get};
use crate::otlp_receiver::Receiver;
use crate::traces::{Expected, check_trace_shape, flush, provider_for};

const NM: &str = "nm-e2e";
const NODE: &str = "node-0";
const NS: &str = "precious";
const POD: &str = "db-0";
const PDB: &str = "db-budget";
const REFUSALS: f64 = 2.0;

fn client_for(sim: &SimHandle, agent: &str) -> kube::Client {
    sim.kube_client_with(&ClientOptions {
        user_agent: agent.into(),
        ..ClientOptions::default()
    })
    .unwrap()
}

async fn create<K>(api: kube::Api<K>, object: serde_json::Value)
where
    K: Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).unwrap();
    api.create(&Default::default(), &object).await.unwrap();
}

/// Two plain nodes, plus a pod on node-0 that a budget protects completely.
async fn simulator_with_a_guarded_pod() -> (SimHandle, kube::Client) {
    let config = SimConfig::default()
        .scenario(Scenario::plain(2, 4).pdb(None))
        .time_scale(0.0)
        .crd(&nmo::crd::definition())
        .unwrap();
    let sim = Simulator::start(config).await.unwrap();
    let client = client_for(&sim, "nmo-test");
    use k8s_openapi::api::core::v1::{Namespace, Pod};
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    create(
        kube::Api::<Namespace>::all(client.clone()),
        json!({"metadata": {"name": NS}}),
    )
    .await;
    create(
        kube::Api::<Pod>::namespaced(client.clone(), NS),
        json!({
            "metadata": {"name": POD, "namespace": NS, "labels": {"app": "db"}},
            "spec": {
                "nodeName": NODE,
                "terminationGracePeriodSeconds": 5,
                "containers": [{"name": "main", "image": "registry.invalid/db:1"}]
            }
        }),
    )
    .await;
    create(
        kube::Api::<PodDisruptionBudget>::namespaced(client.clone(), NS),
        json!({
            "metadata": {"name": PDB, "namespace": NS},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}
        }),
    )
    .await;
    (sim, client)
}

/// A counter's value (a small whole number, exported as a float) as a count.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "counters are whole numbers far below 2^52"
)]
fn whole(counter: f64) -> usize {
    counter as usize
}

/// A local port nothing listens on right now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// GET that tolerates a server not listening yet: None then.
async fn try_get(address: std::net::SocketAddr, path: &str) -> Option<(u16, String)> {
    tokio::net::TcpStream::connect(address).await.ok()?;
    Some(http_get(address, path).await)
}

fn phase(sim: &SimHandle) -> Option<String> {
    sim.get_json("nodemaintenance.medik8s.io", "nodemaintenances", "", NM)
        .and_then(|nm| nm["status"]["phase"].as_str().map(str::to_string))
}

// current_thread: simulator, operator and receiver share this thread, so the scoped subscriber
// sees every span nmo makes (the batch exporter has a thread of its own).
#[tokio::test]
async fn a_drain_on_the_simulator_is_traced_metered_and_probed() {
    let receiver = Receiver::start().await;
    let provider = provider_for(&receiver);
    let subscriber = tracing_subscriber::registry().with(telemetry::otel_layer(&provider));
    let guard = tracing::subscriber::set_default(subscriber);

    let (sim, client) = simulator_with_a_guarded_pod().await;
    let metrics_at: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let probes_at: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let options = OperatorOptions {
        metrics_bind_address: metrics_at.to_string(),
        health_probe_bind_address: probes_at.to_string(),
        ..OperatorOptions::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let operator = tokio::spawn(nmo::operator::run(
        client_for(&sim, "nmo-operator"),
        options,
        async {
            let _ = stopped.await;
        },
    ));

    // Ready once the NodeMaintenance watch has listed.
    let mut ready = false;
    for _ in 0..200 {
        if let Some((status, _)) = try_get(probes_at, "/readyz").await {
            ready = status == 200;
            if ready {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(ready, "/readyz never said ready");
    assert_eq!(http_get(probes_at, "/healthz").await.0, 200);

    create(
        kube::Api::<nmo::crd::NodeMaintenance>::all(client.clone()),
        json!({
            "apiVersion": "nodemaintenance.medik8s.io/v1beta1",
            "kind": "NodeMaintenance",
            "metadata": {"name": NM},
            "spec": {"nodeName": NODE, "reason": "end-to-end test"}
        }),
    )
    .await;
    let refused = "nmo_evictions_total{result=\"blocked_by_pdb\"}";
    for _ in 0..400 {
        let (_, text) = http_get(metrics_at, "/metrics").await;
        if sample(&text, refused).unwrap_or(0.0) >= REFUSALS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let api: kube::Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        kube::Api::namespaced(client.clone(), NS);
    let relax = json!({"spec": {"minAvailable": 0}});
    api.patch(PDB, &Default::default(), &kube::api::Patch::Merge(&relax))
        .await
        .unwrap();
    eventually("phase Succeeded", || {
        phase(&sim).as_deref() == Some("Succeeded")
    })
    .await;

    let (status, text) = http_get(metrics_at, "/metrics").await;
    assert_eq!(status, 200);
    let evicted = value(&text, "nmo_evictions_total{result=\"evicted\"}");
    let blocked = value(&text, refused);
    assert!(blocked >= REFUSALS, "{text}");
    let nm = sim
        .get_json("nodemaintenance.medik8s.io", "nodemaintenances", "", NM)
        .unwrap();
    assert_eq!(
        Some(evicted),
        nm["status"]["evictionPods"].as_f64(),
        "every pod the drain removed was evicted: {text}"
    );
    assert_eq!(value(&text, "nmo_maintenances{phase=\"Succeeded\"}"), 1.0);
    assert_eq!(value(&text, "nmo_drain_duration_seconds_count"), 1.0);
    assert_eq!(
        value(
            &text,
            "nmo_lease_operations_total{operation=\"acquire\",result=\"ok\"}"
        ),
        1.0
    );
    let api_calls = |verb: &str, resource: &str, code: &str| {
        sample(
            &text,
            &format!(
                "nmo_kube_api_requests_total{{verb=\"{verb}\",resource=\"{resource}\",code=\"{code}\"}}"
            ),
        )
        .unwrap_or(0.0)
    };
    assert_eq!(
        api_calls("create", "pods/eviction", "201"),
        evicted,
        "{text}"
    );
    assert_eq!(
        api_calls("create", "pods/eviction", "429"),
        blocked,
        "{text}"
    );
    assert!(
        api_calls("watch", "nodemaintenances", "200") >= 1.0,
        "{text}"
    );
    assert!(api_calls("patch", "nodes", "200") >= 1.0, "{text}");

    kube::Api::<nmo::crd::NodeMaintenance>::all(client.clone())
        .delete(NM, &Default::default())
        .await
        .unwrap();
    eventually("the NodeMaintenance to be gone", || {
        sim.get_json("nodemaintenance.medik8s.io", "nodemaintenances", "", NM)
            .is_none()
    })
    .await;
    let (_, text) = http_get(metrics_at, "/metrics").await;
    assert_eq!(value(&text, "nmo_maintenances{phase=\"Succeeded\"}"), 0.0);

    let _ = stop.send(());
    operator.await.unwrap().unwrap();
    drop(guard);
    flush(&provider).await;
    let pods = check_trace_shape(
        &receiver.spans(),
        &Expected {
            maintenance: NM,
            node: NODE,
            reason: "end-to-end test",
            blocked: (POD, NS),
            pdb: PDB,
            eviction_calls: whole(evicted + blocked),
            min_refusals: whole(REFUSALS),
        },
    );
    assert_eq!(pods.len() as f64, evicted);
    let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
    sim.shutdown().await;
}
