//! Log lines inside a maintenance name its node and its trace id, even with no exporter
//! configured (the trace id still ties a maintenance's lines together), and even after the
//! maintenance's trace has ended. JSON lines have zap's shape (the Go operator's): `level`,
//! `ts`, `logger`, `caller`, `msg`, and every field, the spans' included, at the top level, as
//! Loki and Elasticsearch index them.

use std::io::Write;
use std::sync::{Arc, Mutex};

use nmo::observability::operator_metrics::ProcessObserver;
use nmo::observability::telemetry::{self, LogFormat};
use opentelemetry_sdk::trace::SdkTracerProvider;
use serde_json::Value;
use tracing_subscriber::layer::SubscriberExt;

use std::time::Duration;

use nmo_actors::model::{Maintenance, Phase};

use crate::obs_support::{
    BLOCKED, FakeOperator, NODE, NS, PDB, cluster_with_guarded_pod, drain_through_the_pdb,
    end_maintenance,
};
use crate::otlp_receiver::Receiver;
use crate::support::eventually;
use crate::traces::{flush, provider_for};

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

/// Installs, for this thread, what `nmo run` does: the traces of `provider` and zap-shaped JSON
/// log lines, captured in memory.
fn capture_json_logs(
    provider: &SdkTracerProvider,
) -> (Captured, tracing::subscriber::DefaultGuard) {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::registry()
        .with(telemetry::otel_layer(provider))
        .with(telemetry::log_layer(LogFormat::Json, captured.clone()));
    (captured, tracing::subscriber::set_default(subscriber))
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
    let (captured, guard) = capture_json_logs(&provider);

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
            l["logger"]
                .as_str()
                .is_some_and(|t| t.starts_with("nmo_actors"))
        })
        .collect();
    assert!(ours.len() >= 3, "too few lines to judge:\n{output}");
    let mut trace_ids = std::collections::BTreeSet::new();
    for line in &ours {
        // zap's keys, as the Go operator writes them.
        assert!(
            line["msg"].is_string(),
            "the message at the top level: {line}"
        );
        assert!(
            ["debug", "info", "warn", "error"]
                .contains(&line["level"].as_str().unwrap_or_default()),
            "{line}"
        );
        assert!(
            line["ts"].is_string() && line["caller"].is_string(),
            "{line}"
        );
        // The maintenance's fields at the top level, no span list.
        assert_eq!(line["node"], NODE, "{line}");
        assert_eq!(line["nodemaintenance"], NM, "{line}");
        assert!(
            line.get("fields").is_none() && line.get("spans").is_none(),
            "flat: {line}"
        );
        let trace_id = line["trace_id"].as_str().unwrap_or_default();
        assert!(is_trace_id(trace_id), "no trace id in {line}");
        trace_ids.insert(trace_id.to_string());
    }
    // One trace id for the maintenance, another for ending it.
    assert_eq!(trace_ids.len(), 2, "{trace_ids:?}");
    let refusal = ours
        .iter()
        .find(|l| {
            l["msg"]
                .as_str()
                .is_some_and(|m| m.starts_with("blocked by a PodDisruptionBudget"))
        })
        .expect("the refusal is logged");
    // The eviction attempt's own span fields too.
    assert_eq!(refusal["pod"], BLOCKED, "{refusal}");
    assert_eq!(refusal["namespace"], NS, "{refusal}");
    let first = ours[0]["trace_id"].as_str().unwrap_or_default();
    assert_eq!(
        refusal["trace_id"], first,
        "the refusal is the maintenance's: {refusal}"
    );
}

/// A reason as long as the CRD allows (1024 characters; an object from before the schema may
/// carry more): the maintenance's spans and every log line inside it carry at most its first
/// 256 characters, so that one NodeMaintenance cannot blow up every line and span it causes.
#[tokio::test]
async fn a_long_reason_is_cut_in_spans_and_log_lines() {
    if run_alone("logs::a_long_reason_is_cut_in_spans_and_log_lines") {
        return;
    }
    const SHOWN: usize = 256;
    let reason = "r".repeat(4 * SHOWN);
    let receiver = Receiver::start().await;
    let provider = provider_for(&receiver);
    let (captured, guard) = capture_json_logs(&provider);

    let cluster = cluster_with_guarded_pod();
    let operator = FakeOperator::start(cluster.clone(), ProcessObserver::default().shared()).await;
    cluster.create(
        Maintenance::test(NM)
            .on(NODE)
            .created_at(chrono::Utc::now())
            .with_reason(&reason),
    );
    // The guarded pod's budget lets it go at once: the reason is what is looked at here.
    cluster.set_pdb_allowed(NS, PDB, 1);
    eventually("phase Succeeded", Duration::from_secs(20), async || {
        cluster.status(NM).phase == Some(Phase::Succeeded)
    })
    .await;
    end_maintenance(&cluster, NM).await;
    operator.stop().await;
    drop(guard);
    flush(&provider).await;

    let output = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let reasons: Vec<String> = output
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .filter_map(|line| line["reason"].as_str().map(str::to_string))
        .collect();
    assert!(!reasons.is_empty(), "no line carries the reason:\n{output}");
    for shown in &reasons {
        assert!(
            shown.starts_with(&reason[..SHOWN]) && shown.chars().count() <= SHOWN + 1,
            "a log line carries {} characters of the reason",
            shown.chars().count()
        );
    }
    let spans = receiver.spans();
    let root = spans
        .iter()
        .find(|span| span.name == "maintenance")
        .unwrap_or_else(|| panic!("no maintenance span in {spans:#?}"));
    let shown = root.attr("nmo.reason").unwrap_or_default();
    assert!(
        shown.starts_with(&reason[..SHOWN]) && shown.chars().count() <= SHOWN + 1,
        "the maintenance span carries {} characters of the reason",
        shown.chars().count()
    );
    let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
}
