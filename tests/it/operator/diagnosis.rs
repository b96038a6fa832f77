//! Why a drain is stuck, end to end on both backends: each class of blocker shows as the
//! `DrainBlocked` condition's reason, in `lastError`, in `pendingPodsReasons` and as one event
//! per change (not per retry).

use std::time::Duration;

use nmo_sim::Scenario;
use serde_json::{Value, json};

use crate::support::{Backend, Phase, TestEnv, both_backends, elements, eventually};

/// How long a diagnosis may take to show (PDBs are looked at 3 s after they block).
const DIAGNOSED: Duration = Duration::from_secs(20);

/// Waits until `nm`'s `DrainBlocked` condition is True with `reason` and a message saying
/// `text`; returns the condition.
async fn wait_blocked(env: &TestEnv, nm: &str, reason: &str, text: &str) -> Value {
    let what = format!("{nm} to show DrainBlocked {reason} saying {text:?}");
    eventually(&what, DIAGNOSED, async || {
        let c = env.condition(nm, "DrainBlocked").await;
        c["status"] == "True"
            && c["reason"] == reason
            && c["message"].as_str().is_some_and(|m| m.contains(text))
    })
    .await;
    env.condition(nm, "DrainBlocked").await
}

/// Asserts the status and the events say the same as the condition, once.
async fn assert_reported(env: &TestEnv, nm: &str, reason: &str, mentions: &[&str]) {
    let condition = env.condition(nm, "DrainBlocked").await;
    let status = env.status(nm).await;
    let last_error = status["lastError"].as_str().unwrap_or_default().to_string();
    for text in mentions {
        assert!(
            condition["message"]
                .as_str()
                .unwrap_or_default()
                .contains(text),
            "condition lacks {text:?}: {condition}"
        );
        assert!(
            last_error.contains(text),
            "lastError lacks {text:?}: {last_error}"
        );
    }
    let reasons = elements(&status["pendingPodsReasons"]);
    assert!(
        reasons.iter().any(|r| r["diagnosis"] == reason),
        "pendingPodsReasons: {reasons:?}"
    );
    let events = env.event_messages(nm, "DrainBlocked").await;
    let about: Vec<&String> = events.iter().filter(|m| m.contains(reason)).collect();
    assert_eq!(about.len(), 1, "one event for the class: {events:?}");
}

/// Creates `nm-0` for node-0, waits until it shows DrainBlocked `reason` saying `text`, and
/// asserts the status and the events say the same, naming each of `mentions`, once.
async fn diagnosed(env: &TestEnv, reason: &str, text: &str, mentions: &[&str]) {
    env.create_maintenance("nm-0", "node-0").await;
    wait_blocked(env, "nm-0", reason, text).await;
    assert_reported(env, "nm-0", reason, mentions).await;
}

/// A Pending pod of `app` that the default scheduler never sees (another scheduler's): it
/// stays not ready until the test says otherwise.
fn pending_pod(namespace: &str, name: &str, app: &str, spec: Value) -> Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
        "spec": {"containers": [{"name": "main", "image": "registry.invalid/app:1"}]},
    });
    if let (Some(pod_spec), Some(extra)) = (pod["spec"].as_object_mut(), spec.as_object()) {
        pod_spec.extend(extra.clone());
    }
    pod
}

async fn waiting_for_a_replacement_names_it_and_the_drain_goes_on_once_it_is_ready(
    backend: Backend,
) {
    let mut env = TestEnv::on(backend)
        .nodes(2, 1)
        .namespace_with_pods("shop", "web", &[("web-0", "node-0"), ("web-1", "node-1")])
        .object(pending_pod(
            "shop",
            "web-new",
            "web",
            json!({"schedulerName": "elsewhere"}),
        ))
        // 3 pods expected, 2 healthy, 2 needed: it waits for web-new.
        .pdb("shop", "web", "web", 2)
        .start()
        .await;
    // The pod as the cluster names it (its namespace is the test's own on the real backend).
    let web_new = format!("{}/web-new", env.ns("shop"));
    diagnosed(
        &env,
        "WaitingForReplacement",
        &format!("waiting for pod {web_new} to become ready"),
        &[&web_new, "web"],
    )
    .await;

    // It becomes ready: the PDB allows one disruption, and web-0 goes at once.
    let now = chrono::Utc::now().to_rfc3339();
    env.patch_pod_status(
        "shop",
        "web-new",
        json!({"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": now}]}),
    )
    .await;
    env.wait_succeeded("nm-0").await;
    let condition = env.condition("nm-0", "DrainBlocked").await;
    assert!(condition.is_null(), "not blocked any more: {condition}");
    assert!(!env.pod_exists("shop", "web-0").await);
    env.stop_cleanly().await;
}
both_backends!(waiting_for_a_replacement_names_it_and_the_drain_goes_on_once_it_is_ready);

async fn a_replacement_no_node_can_take_is_unschedulable_with_the_schedulers_words(
    backend: Backend,
) {
    let mut env = TestEnv::on(backend)
        .nodes(2, 1)
        .namespace_with_pods("shop", "web", &[("web-0", "node-0")])
        .object(pending_pod(
            "shop",
            "web-x",
            "web",
            json!({"nodeSelector": {"disk": "ssd"}}),
        ))
        // 2 pods expected, 1 healthy, 1 needed.
        .pdb("shop", "web", "web", 1)
        .start()
        .await;
    diagnosed(
        &env,
        "ReplacementUnschedulable",
        "shop/web-x",
        &["shop/web-x", "cannot be scheduled", "nodes are available"],
    )
    .await;
    assert!(env.pod_exists("shop", "web-0").await);
    env.stop_cleanly().await;
}
both_backends!(a_replacement_no_node_can_take_is_unschedulable_with_the_schedulers_words);

async fn a_replacement_that_fits_only_nodes_other_maintenances_cordon_is_a_cross_node_deadlock(
    backend: Backend,
) {
    // One ReplicaSet of 4 behind `maxUnavailable: 1`, 2 pods on each of the 2 nodes.
    let mut env = TestEnv::on(backend)
        .scenario(Scenario::plain(2, 2).replicasets(1))
        .start()
        .await;
    // node-1 first: its pods' replacements go to node-0, and it is drained.
    env.maintain("nm-1", "node-1").await;
    // Then node-0: the first replacement has nowhere to go but the two cordoned nodes.
    // The other maintenance and its node as the cluster names them.
    let other = format!("{} (node {})", env.name("nm-1"), env.name("node-1"));
    diagnosed(
        &env,
        "CrossNodeDeadlock",
        "nm-1",
        &["cross-node deadlock", &other],
    )
    .await;
    let events = env.event_messages("nm-0", "DrainBlocked").await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        env.event_messages("nm-0", "DrainBlocked").await.len(),
        events.len(),
        "no event per retry"
    );

    // Ending the other maintenance ends the deadlock.
    env.delete_maintenance("nm-1").await;
    env.wait_succeeded("nm-0").await;
    env.stop_cleanly().await;
}
both_backends!(
    a_replacement_that_fits_only_nodes_other_maintenances_cordon_is_a_cross_node_deadlock
);

async fn a_pdb_that_can_never_allow_is_structural(backend: Backend) {
    let mut env = TestEnv::on(backend)
        .nodes(2, 1)
        .precious_pods(&["db-0"], 1)
        .start()
        .await;
    diagnosed(
        &env,
        "StructuralBudget",
        "db-budget",
        &[
            "db-budget",
            "can never allow a disruption",
            "minAvailable 1",
        ],
    )
    .await;
    // This maintenance's events (a real cluster's `default` keeps earlier tests' too).
    let name = env.name("nm-0");
    let events = env.events().await;
    assert!(
        events
            .iter()
            .any(|e| e["involvedObject"]["name"] == name.as_str()
                && e["reason"] == "DrainBlocked"
                && e["type"] == "Warning"),
        "a structural budget needs a person: a Warning"
    );
    env.stop_cleanly().await;
}
both_backends!(a_pdb_that_can_never_allow_is_structural);

async fn a_pod_under_two_pdbs_names_both(backend: Backend) {
    let mut env = TestEnv::on(backend)
        .nodes(2, 1)
        .precious_pods(&["db-0"], 0)
        .pdb("precious", "db-budget-too", "db", 0)
        .start()
        .await;
    diagnosed(
        &env,
        "MultipleBudgets",
        "db-budget-too",
        &[
            "more than one PodDisruptionBudget",
            "db-budget, db-budget-too",
        ],
    )
    .await;
    let reasons = env.status("nm-0").await["pendingPodsReasons"].clone();
    assert_eq!(
        reasons[0]["reason"], "TooManyPodDisruptionBudgets",
        "{reasons}"
    );
    // The API server refuses such an eviction; nmo never deletes the pod instead.
    assert!(
        env.pod_exists("precious", "db-0").await,
        "the pod is not deleted instead"
    );
    assert_eq!(env.phase("nm-0").await, Some(Phase::Running));
    env.stop_cleanly().await;
}
both_backends!(a_pod_under_two_pdbs_names_both);
