//! Log lines inside a maintenance name its node and its trace id, even with no exporter
//! configured (the trace id still ties a maintenance's lines together), and even after the
//! maintenance's trace has ended. JSON lines are flat: the message and the event's fields at
//! the top level, as Loki and Elasticsearch index them.

use std::io::Write;
use std::sync::{Arc, Mutex};

use nmo::observability::operator_metrics::ProcessObserver;
use nmo::observability::telemetry::{self, LogFormat};
use opentelemetry_sdk::trace::SdkTracerProvider;
use serde_json::Value;
use tracing_subscriber::layer::SubscriberExt;

use crate::obs_support::{
    FakeOperator, NODE, cluster_with_guarded_pod, drain_through_the_pdb, end_maintenance,
};

const NM: &str = "nm-logged";

/// Set in the child process that runs the test alone (see below).
const ALONE: &str = "NMO_LOGS_TEST_ALONE";

/// Runs this test again in a process of its own, where no other test installs a subscriber:
/// tracing keeps one interest cache per callsite for the whole process, and while other tests'
/// subscribers come and go (the trace tests run at the same time) it can leave the log-only
/// span of a finished maintenance disabled for this test's subscriber, which `nmo run` (one
/// subscriber for its whole life) never sees.
fn run_alone(test: &str) -> bool {
    if std::env::var_os(ALONE).is_some() {
        return false;
    }
    let output = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", test, "--test-threads", "1"])
        .env(ALONE, "1")
        .output()
        .expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{test} alone failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    true
}

/// Log output captured in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

fn is_trace_id(id: &str) -> bool {
    id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit()) && id.chars().any(|c| c != '0')
}

#[tokio::test]
async fn log_lines_inside_a_maintenance_carry_node_and_trace_id() {
    if run_alone("logs::log_lines_inside_a_maintenance_carry_node_and_trace_id") {
        return;
    }
    // What `nmo run` installs when no OTLP endpoint is set: a provider without exporter.
    let provider = SdkTracerProvider::builder().build();
    let captured = Captured::default();
    let subscriber = tracing_subscriber::registry()
        .with(telemetry::otel_layer(&provider))
        .with(telemetry::log_layer(LogFormat::Json, captured.clone()));
    let guard = tracing::subscriber::set_default(subscriber);

    let cluster = cluster_with_guarded_pod();
    let operator = FakeOperator::start(cluster.clone(), ProcessObserver::default().shared()).await;
    drain_through_the_pdb(&cluster, NM).await;
    end_maintenance(&cluster, NM).await;
    operator.stop().await;
    drop(guard);

    let output = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<Value> = output
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let ours: Vec<&Value> = lines
        .iter()
        .filter(|l| {
            l["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("nmo_actors"))
        })
        .collect();
    assert!(ours.len() >= 3, "too few lines to judge:\n{output}");
    let mut trace_ids = std::collections::BTreeMap::new();
    for line in &ours {
        let root = &line["spans"][0];
        assert_eq!(root["k8s.node.name"], NODE, "{line}");
        assert!(line.get("fields").is_none(), "flat: {line}");
        assert!(
            line["message"].is_string(),
            "the message at the top level: {line}"
        );
        let trace_id = root["trace_id"].as_str().unwrap_or_default();
        assert!(is_trace_id(trace_id), "no trace id in {line}");
        let root_name = root["name"].as_str().unwrap_or_default().to_string();
        trace_ids
            .entry(root_name)
            .or_insert_with(std::collections::BTreeSet::new)
            .insert(trace_id.to_string());
    }
    // One trace id for the maintenance, another for ending it.
    let maintenance = &trace_ids["maintenance"];
    let end = &trace_ids["end_maintenance"];
    assert_eq!(maintenance.len(), 1, "{trace_ids:?}");
    assert_eq!(end.len(), 1, "{trace_ids:?}");
    assert_ne!(maintenance, end);
    let refusal = ours
        .iter()
        .find(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("blocked by a PodDisruptionBudget"))
        })
        .expect("the refusal is logged");
    let names: Vec<&str> = refusal["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["maintenance", "drain", "evict_pod"], "{refusal}");
}
