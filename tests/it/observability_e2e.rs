//! nmo end to end on both backends, observed from outside: the traces it
//! exports over OTLP/gRPC, `/metrics`, and the probes, for one drain held up by a
//! PodDisruptionBudget (watched: no eviction is even tried while it allows none, and the
//! blocked-drain metrics say since when and why) and the end of that maintenance.

use std::time::Duration;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use nmo::observability::telemetry;
use nmo::operator::OperatorOptions;
use tracing_subscriber::layer::SubscriberExt;

use crate::metrics::{sample, value};
use crate::obs_support::http_get;
use crate::otlp_receiver::Receiver;
use crate::support::{Backend, TestEnv, both_backends, eventually};
use crate::traces::{Expected, check_trace_shape, flush, provider_for};

const NM: &str = "nm-e2e";
const NODE: &str = "node-0";
const NS: &str = "precious";
const POD: &str = "db-0";
const PDB: &str = "db-budget";

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

// current_thread: the simulator or the test's clients, the operator and the receiver share
// this thread, so the scoped subscriber sees every span nmo makes (the batch exporter has a
// thread of its own; a real backend's control plane and kubelet stand-in have their own).
async fn a_drain_is_traced_metered_and_probed(backend: Backend) {
    let receiver = Receiver::start().await;
    let provider = provider_for(&receiver);
    let subscriber = tracing_subscriber::registry().with(telemetry::otel_layer(&provider));
    let guard = tracing::subscriber::set_default(subscriber);

    let metrics_at: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let probes_at: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let options = OperatorOptions {
        metrics_bind_address: metrics_at.to_string(),
        // Plain HTTP: what the metrics say is tested here, who may read them in metrics_auth.
        metrics_secure: false,
        health_probe_bind_address: probes_at.to_string(),
        ..OperatorOptions::default()
    };
    // Two plain nodes, plus a pod on node-0 that a budget protects completely.
    let mut env = TestEnv::on(backend)
        .nodes(2, 4)
        .namespace(NS)
        .pod(NS, POD, NODE, "db")
        .pdb(NS, PDB, "db", 1)
        .operator_options(options)
        .operator_on_test_runtime()
        .start()
        .await;

    // Ready once the NodeMaintenance watch has listed.
    eventually("/readyz to say ready", Duration::from_secs(5), async || {
        matches!(try_get(probes_at, "/readyz").await, Some((200, _)))
    })
    .await;
    assert_eq!(http_get(probes_at, "/healthz").await.0, 200);

    env.create_maintenance(NM, NODE).await;
    let refused = "nmo_evictions_total{result=\"blocked_by_pdb\"}";
    // The maintenance, its node and the budget's namespace as the cluster names them.
    let (nm, node, ns) = (env.name(NM), env.name(NODE), env.ns(NS));
    let since = format!(
        "nmo_maintenance_blocked_since_seconds{{nodemaintenance=\"{nm}\",node=\"{node}\"}}"
    );
    eventually(
        "the metrics to show the drain blocked",
        Duration::from_secs(20),
        async || {
            let (_, text) = http_get(metrics_at, "/metrics").await;
            sample(&text, &since).unwrap_or(0.0) > 0.0
                && sample(&text, "nmo_drains_blocked{reason=\"StructuralBudget\"}") == Some(1.0)
        },
    )
    .await;
    let (_, text) = http_get(metrics_at, "/metrics").await;
    let blocked_at = value(&text, &since);
    let now = chrono::Utc::now().timestamp() as f64;
    assert!(
        (now - blocked_at).abs() < 30.0,
        "blocked since a unix time of a moment ago: {blocked_at} vs {now}"
    );
    // The budget allows none: no eviction is tried once its status is known (one probe at
    // most while the disruption controller has not computed the new budget yet). On a real
    // cluster the status may lag what nmo sees of the pod (db-0 Ready, not yet counted
    // healthy) a moment longer: a probe may go then too. Once the status counts db-0 and nmo
    // has seen it, nothing more goes.
    eventually(
        "the budget's status to count db-0",
        Duration::from_secs(20),
        async || {
            env.get_json::<PodDisruptionBudget>(Some(NS), PDB)
                .await
                .is_some_and(|pdb| {
                    pdb["status"]["observedGeneration"] == pdb["metadata"]["generation"]
                        && pdb["status"]["currentHealthy"] == 1
                })
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (_, text) = http_get(metrics_at, "/metrics").await;
    assert!(sample(&text, refused).unwrap_or(0.0) <= 1.0, "{text}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (_, later) = http_get(metrics_at, "/metrics").await;
    assert_eq!(
        sample(&later, refused),
        sample(&text, refused),
        "no more calls while it allows none: {later}"
    );
    let refused_before_relax = sample(&later, refused).unwrap_or(0.0);
    env.relax_pdb(NS, PDB, 0).await;
    // As long as any maintenance may take (a real cluster's controllers take their time).
    env.wait_succeeded(NM).await;

    let (status, text) = http_get(metrics_at, "/metrics").await;
    assert_eq!(status, 200);
    let evicted = value(&text, "nmo_evictions_total{result=\"evicted\"}");
    let blocked = sample(&text, refused).unwrap_or(0.0);
    // After the relax, the budget's status is behind its new spec until the disruption
    // controller catches up (on a loaded real cluster, seconds): nmo probes the stale budget,
    // each probe after a backoff twice as long as the last (1 s base). However long the
    // controller takes within a maintenance's wait, that is a handful of probes, never a
    // poll: more than MAX_PROBES_AFTER_RELAX means the backoff is not growing.
    const MAX_PROBES_AFTER_RELAX: f64 = 6.0;
    let probes_after_relax = blocked - refused_before_relax;
    assert!(
        probes_after_relax <= MAX_PROBES_AFTER_RELAX,
        "{probes_after_relax} probes of a budget whose status was behind: {text}"
    );
    assert!(
        sample(&text, &since).is_none(),
        "absent once drained: {text}"
    );
    let stored = env.maintenance(NM).await.unwrap();
    assert_eq!(
        Some(evicted),
        stored["status"]["evictionPods"].as_f64(),
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

    env.delete_maintenance(NM).await;
    env.wait_gone(NM).await;
    let (_, text) = http_get(metrics_at, "/metrics").await;
    assert_eq!(value(&text, "nmo_maintenances{phase=\"Succeeded\"}"), 0.0);

    env.stop_operator().await.unwrap();
    drop(guard);
    flush(&provider).await;
    let pods = check_trace_shape(
        &receiver.spans(),
        &Expected {
            maintenance: &nm,
            node: &node,
            reason: "end-to-end test",
            blocked: (POD, &ns),
            pdb: PDB,
            eviction_calls: whole(evicted + blocked),
            min_refusals: 0,
            // The probe before the budget's first status, and those after the relax while
            // the status was behind the new spec (`observedGeneration`), both bounded above:
            // the trace shows each one the metrics counted.
            probes: whole(blocked),
        },
    );
    assert_eq!(pods.len() as f64, evicted);
    let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
}
both_backends!(current_thread: a_drain_is_traced_metered_and_probed);
