//! Conventions users' tools rely on, checked through the API and `kubectl` (installed on every
//! machine of the project): nmo's events carry the Go operator's reporting component, and
//! `kubectl get nm -o wide` shows why a drain is blocked and the last error.

use std::process::Command;

use serde_json::{Value, json};

use crate::support::{Backend, TestEnv, assert_success, both_backends, maintenance_object};

async fn events_are_reported_by_the_go_operator_s_component(backend: Backend) {
    let env = TestEnv::on(backend)
        .nodes(2, 2)
        .start_maintaining("nm-events", "node-0")
        .await;
    let ours: Vec<serde_json::Value> = env
        .events()
        .await
        .into_iter()
        .filter(|event| event["involvedObject"]["name"] == env.name("nm-events").as_str())
        .collect();
    assert!(
        ours.iter()
            .any(|event| event["reason"] == "BeginMaintenance"),
        "{ours:#?}"
    );
    for event in &ours {
        // The Go operator: mgr.GetEventRecorderFor("NodeMaintenance").
        assert_eq!(event["reportingComponent"], "NodeMaintenance", "{event}");
    }
}

/// An event said again about the same object within the series' time is one Event whose
/// `series.count` grows, as client-go's recorder writes it, not a new object each time.
async fn an_event_said_again_is_one_event_with_a_series(backend: Backend) {
    use nmo_actors::model::{Event, EventTarget, EventType};
    use nmo_actors::ports::Cluster as _;

    let env = TestEnv::on(backend).nodes(1, 0).start_idle().await;
    let cluster = nmo::cluster::KubeCluster::new(env.operator_client(), Some("nmo-test".into()));
    let node = env.name("node-0");
    let event = |message: &str| Event {
        target: EventTarget::Node {
            name: node.as_str().into(),
            uid: "".into(),
        },
        type_: EventType::Warning,
        reason: "SeriesTest".into(),
        message: message.into(),
    };
    for message in ["first", "second", "third"] {
        cluster
            .emit_event(&event(message))
            .await
            .expect("the event is written");
    }
    let ours: Vec<Value> = env
        .events()
        .await
        .into_iter()
        .filter(|e| e["reason"] == "SeriesTest" && e["involvedObject"]["name"] == node.as_str())
        .collect();
    assert_eq!(ours.len(), 1, "one Event for the series: {ours:#?}");
    assert_eq!(ours[0]["series"]["count"], 3, "{:#?}", ours[0]);
    assert_eq!(ours[0]["message"], "first", "a series keeps its first note");
    assert_eq!(ours[0]["type"], "Warning");
    assert_eq!(ours[0]["reportingInstance"], "nmo-test");
}

/// `kubectl get <args>` against the environment, as the admin: its standard output.
fn kubectl(env: &TestEnv, args: &[&str]) -> String {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a directory");
    let kubeconfig = dir.path().join("kubeconfig");
    env.write_admin_kubeconfig(&kubeconfig);
    let output = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(args)
        .output()
        .expect("kubectl runs (.ci/run installs it)");
    assert_success(&output, format!("kubectl {args:?}"));
    String::from_utf8(output.stdout).expect("UTF-8")
}

/// The cells of a table kubectl printed (columns split on two or more spaces).
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|line| {
            line.split("  ")
                .map(str::trim)
                .filter(|cell| !cell.is_empty())
                .map(str::to_string)
                .collect()
        })
        .collect()
}

/// A NodeMaintenance of node-0 for a kernel update, with `status` as written.
fn kernel_maintenance(name: &str, status: Value) -> Value {
    let mut nm = maintenance_object(name, json!({"nodeName": "node-0", "reason": "kernel"}));
    nm["status"] = status;
    nm
}

/// On the real backend, kubectl reads the printer columns of the CRD as installed.
async fn kubectl_wide_shows_the_blocking_reason_and_the_last_error(backend: Backend) {
    let error = "cannot evict pod shop/db-0: blocked by PodDisruptionBudget shop/db";
    let env = TestEnv::on(backend)
        .budgeted_nodes(1, 0)
        .static_cluster()
        .without_operator()
        .object(kernel_maintenance(
            "nm-blocked",
            json!({
                "phase": "Running",
                "drainProgress": 50,
                "lastError": error,
                "conditions": [
                    {"type": "Drained", "status": "False", "reason": "Draining",
                     "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                    {"type": "DrainBlocked", "status": "True", "reason": "BudgetExhausted",
                     "message": error, "lastTransitionTime": "2026-01-01T00:00:00Z"}
                ]
            }),
        ))
        .object(kernel_maintenance(
            "nm-queued",
            json!({
                "phase": "Running",
                "drainProgress": 0,
                "queue": {"position": 2, "waitingFor": "max-parallel-maintenances: 20 of 20 running"}
            }),
        ))
        .start()
        .await;

    let narrow = rows(&kubectl(&env, &["get", "nm"]));
    assert_eq!(
        narrow[0],
        ["NAME", "NODE", "PHASE", "PROGRESS", "REASON", "AGE"],
        "priority-1 columns only with -o wide"
    );
    let wide = rows(&kubectl(&env, &["get", "nm", "-o", "wide"]));
    assert_eq!(
        wide[0],
        [
            "NAME",
            "NODE",
            "PHASE",
            "PROGRESS",
            "REASON",
            "AGE",
            "QUEUE",
            "WAITING FOR",
            "BLOCKED",
            "ERROR"
        ]
    );
    let row = &wide[1];
    assert_eq!(row[0], env.name("nm-blocked"));
    // Not queued: its QUEUE and WAITING FOR cells are blank (and dropped by `rows`).
    assert_eq!(row[6], "BudgetExhausted", "{row:?}");
    assert_eq!(row[7], error, "{row:?}");
    let queued = &wide[2];
    assert_eq!(
        queued[..8],
        [
            env.name("nm-queued").as_str(),
            env.name("node-0").as_str(),
            "Running",
            "0",
            "kernel",
            queued[5].as_str(),
            "2",
            "max-parallel-maintenances: 20 of 20 running"
        ],
        "{queued:?}"
    );
}

both_backends!(
    events_are_reported_by_the_go_operator_s_component,
    an_event_said_again_is_one_event_with_a_series,
    kubectl_wide_shows_the_blocking_reason_and_the_last_error,
);
