//! The opt-in drain deadline end to end: `spec.drainTimeout` validated by the CRD schema,
//! the time left shown while draining, and `Hold` / `Undo` when it passes. A deadline never
//! deletes a pod a budget protects.

use std::time::Duration;

use nmo::crd::NodeMaintenance;
use serde_json::{Value, json};

use crate::support::{Backend, TestEnv, both_backends, eventually, maintenance_object, taint_keys};

/// node-0 holds a pod its budget never lets go (`minAvailable: 1` of its one pod), and nmo
/// runs with `nm-0` for node-0 just created, its drain to end after `timeout`.
async fn a_protected_pod_maintained(
    backend: Backend,
    timeout: &str,
    on_timeout: Option<&str>,
) -> TestEnv {
    let env = TestEnv::on(backend)
        .nodes(2, 1)
        .precious_pods(&["db-0"], 1)
        .start()
        .await;
    env.create_object(maintenance("nm-0", "node-0", timeout, on_timeout))
        .await;
    env
}

fn maintenance(name: &str, node: &str, timeout: &str, on_timeout: Option<&str>) -> Value {
    let mut nm = maintenance_object(
        name,
        json!({"nodeName": node, "reason": "end-to-end test", "drainTimeout": timeout}),
    );
    if let Some(policy) = on_timeout {
        nm["spec"]["onDrainTimeout"] = json!(policy);
    }
    nm
}

async fn a_passed_deadline_holds_the_node_and_names_what_blocked_it(backend: Backend) {
    let mut env = a_protected_pod_maintained(backend, "3s", None).await;
    env.wait_failed("nm-0").await;
    let status = env.status("nm-0").await;
    let drained = env.condition("nm-0", "Drained").await;
    assert_eq!(drained["reason"], "DrainTimeout", "{status}");
    let error = status["lastError"].as_str().unwrap_or_default();
    assert!(
        error.contains("drainTimeout 3s") && error.contains("Hold") && error.contains("db-budget"),
        "{error}"
    );
    assert_eq!(
        env.condition("nm-0", "DrainBlocked").await["reason"],
        "StructuralBudget",
        "what blocked it stays shown"
    );
    assert!(
        env.event_reasons("nm-0")
            .await
            .contains(&"FailedMaintenance".to_string())
    );
    let node = env.node("node-0").await;
    assert_eq!(
        node["spec"]["unschedulable"], true,
        "held cordoned for a person"
    );
    assert!(taint_keys(&node).iter().any(|k| k == "medik8s.io/drain"));
    assert!(env.pod_exists("precious", "db-0").await, "never deleted");
    env.stop_cleanly().await;
}
both_backends!(a_passed_deadline_holds_the_node_and_names_what_blocked_it);

async fn a_passed_deadline_with_undo_gives_the_node_back_and_keeps_the_pod(backend: Backend) {
    let mut env = a_protected_pod_maintained(backend, "2s", Some("Undo")).await;
    env.wait_failed("nm-0").await;
    eventually(
        "node-0 to be given back",
        Duration::from_secs(20),
        async || {
            let node = env.node("node-0").await;
            node["spec"]["unschedulable"] != true
                && !taint_keys(&node).iter().any(|k| k == "medik8s.io/drain")
                && env.lease("node-0").await.is_none()
        },
    )
    .await;
    assert_eq!(
        env.condition("nm-0", "Drained").await["reason"],
        "DrainTimeout"
    );
    assert!(env.pod_exists("precious", "db-0").await, "never deleted");
    env.stop_cleanly().await;
}
both_backends!(a_passed_deadline_with_undo_gives_the_node_back_and_keeps_the_pod);

async fn the_time_left_shows_while_draining(backend: Backend) {
    let mut env = a_protected_pod_maintained(backend, "1h30m", Some("Hold")).await;
    eventually(
        "the deadline in the status",
        Duration::from_secs(20),
        async || env.status("nm-0").await["drainTimeRemaining"] == "1h30m",
    )
    .await;
    let status = env.status("nm-0").await;
    let start =
        chrono::DateTime::parse_from_rfc3339(status["drainStartTime"].as_str().unwrap()).unwrap();
    let deadline =
        chrono::DateTime::parse_from_rfc3339(status["drainDeadline"].as_str().unwrap()).unwrap();
    assert_eq!(deadline - start, chrono::Duration::minutes(90), "{status}");
    assert_eq!(status["phase"], "Running");
    env.stop_cleanly().await;
}
both_backends!(the_time_left_shows_while_draining);

async fn the_crd_schema_refuses_a_drain_timeout_that_is_not_a_go_duration(backend: Backend) {
    let env = TestEnv::on(backend).nodes(1, 0).start_idle().await;
    for bad in ["soon", "30", "1d", "-5m", "5 m"] {
        let refused = env
            .try_create_maintenance(maintenance("nm-bad", "node-0", bad, None))
            .await;
        match refused {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 422, "{bad}: {status:?}");
                assert!(
                    status.message.contains("spec.drainTimeout"),
                    "{bad}: {}",
                    status.message
                );
            }
            other => panic!("{bad} accepted: {other:?}"),
        }
    }
    let mut bad_policy = maintenance("nm-bad", "node-0", "30m", None);
    bad_policy["spec"]["onDrainTimeout"] = json!("Later");
    assert!(env.try_create_maintenance(bad_policy).await.is_err());
    env.try_create_maintenance(maintenance("nm-good", "node-0", "1h30m", Some("Undo")))
        .await
        .expect("a Go duration is accepted");
    let stored: NodeMaintenance =
        serde_json::from_value(env.maintenance("nm-good").await.unwrap()).unwrap();
    assert_eq!(stored.spec.drain_timeout.as_deref(), Some("1h30m"));
}
both_backends!(the_crd_schema_refuses_a_drain_timeout_that_is_not_a_go_duration);
