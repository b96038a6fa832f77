//! nmo's record of what a node had before a maintenance: never reused from another
//! maintenance, never rebuilt from a node already in maintenance, kept in a copy only nmo
//! writes (the NodeMaintenance's status), and said in an event and a condition when something
//! is wrong with it. A person's cordon survives every one of these.

use std::time::Duration;

use nmo_actors::model::{DRAIN_TAINT_KEY, EXCLUDE_LABEL, RECORD_ANNOTATION};
use serde_json::{Value, json};

use crate::support::{Backend, TestEnv, both_backends, eventually, taint_keys};

fn record_of(node: &Value) -> Option<Value> {
    node["metadata"]["annotations"][RECORD_ANNOTATION]
        .as_str()
        .map(|text| serde_json::from_str(text).unwrap_or(Value::String(text.to_string())))
}

/// The node is as a person left it: cordoned, without any mark or record of a maintenance.
async fn assert_cordoned_by_a_person_only(env: &TestEnv, node: &str) {
    let after = env.node(node).await;
    assert_eq!(
        after["spec"]["unschedulable"], true,
        "the person's cordon: {after}"
    );
    assert!(
        !taint_keys(&after).contains(&DRAIN_TAINT_KEY.to_string()),
        "{after}"
    );
    assert!(
        after["metadata"]["labels"][EXCLUDE_LABEL].is_null(),
        "{after}"
    );
    assert_eq!(
        record_of(&after),
        None,
        "the undo removes the record: {after}"
    );
}

/// Ends `nm-0`, and asserts that node-0 is as a person left it ([`assert_cordoned_by_a_person_only`]);
/// nmo stops cleanly.
async fn ends_leaving_the_persons_cordon(env: &mut TestEnv) {
    env.end_maintenance("nm-0").await;
    assert_cordoned_by_a_person_only(env, "node-0").await;
    env.stop_cleanly().await;
}

/// The sequence: nmo drove the node, the cluster went back to the Go operator (which
/// undid the node but left nmo's record), a person cordoned the node, and nmo came back. The
/// stale record (of a maintenance long gone, saying "not cordoned") is neither followed by the
/// orphan sweep nor reused by a new maintenance: its undo leaves the person's cordon.
async fn a_stale_record_of_another_maintenance_is_never_reused(backend: Backend) {
    let stale = json!({
        "maintenance": "uid-of-a-maintenance-long-gone",
        "cordoned": false,
        "drainTaint": false,
        "unschedulableTaint": false,
        "label": false,
    });
    let mut env = TestEnv::on(backend)
        .budgeted_nodes(1, 0)
        .patched_node(
            "node-0",
            json!({
                "metadata": {"annotations": {RECORD_ANNOTATION: stale.to_string()}},
                "spec": {"unschedulable": true},
            }),
        )
        .start_maintaining("nm-0", "node-0")
        .await;
    let during = env.node("node-0").await;
    let record = record_of(&during).expect("a record");
    assert_eq!(
        record["cordoned"], true,
        "made from the node as it is: {record}"
    );
    assert_ne!(record["maintenance"], stale["maintenance"]);
    let copy = &env.status("nm-0").await["nodeRecord"];
    assert_eq!(copy["cordoned"], true, "the status keeps a copy: {copy}");
    ends_leaving_the_persons_cordon(&mut env).await;
}

/// The record on the node is removed, then garbled, while the maintenance runs: each time it
/// is written again from the NodeMaintenance's own copy (never from the node, which is in
/// maintenance by then and would say "nothing was there"), the garbling is a Warning event on
/// the node and a condition, and the undo leaves the cordon the node had before.
async fn a_record_lost_or_garbled_mid_maintenance_is_written_again_from_the_copy(backend: Backend) {
    let mut env = TestEnv::on(backend)
        .budgeted_nodes(1, 0)
        .patched_node("node-0", json!({"spec": {"unschedulable": true}}))
        .start_maintaining("nm-0", "node-0")
        .await;
    let record = record_of(&env.node("node-0").await).expect("a record");
    assert_eq!(record["cordoned"], true);

    for (what, value) in [
        ("removed", Value::Null),
        ("garbled", json!("{not a record")),
    ] {
        env.patch_node(
            "node-0",
            json!({"metadata": {"annotations": {RECORD_ANNOTATION: value}}}),
        )
        .await;
        eventually(
            &format!("the {what} record written again"),
            Duration::from_secs(10),
            async || record_of(&env.node("node-0").await).as_ref() == Some(&record),
        )
        .await;
    }
    env.wait_event(
        "a Warning event on the node",
        "node-0",
        "RecordUnreadable",
        &["unreadable"],
    )
    .await;
    env.wait_condition_reason(
        "the condition to say the record was replaced",
        Duration::from_secs(10),
        "nm-0",
        "PriorStateRecorded",
        "RecordReplaced",
    )
    .await;
    ends_leaving_the_persons_cordon(&mut env).await;
}

/// A node nmo takes over from the Go operator in the middle of its maintenance (marked, no
/// record) is recorded as "prior state unknown" (a False condition says so), and its undo
/// takes off every mark of a maintenance, as the Go operator's would, saying so in a Warning
/// event on the node.
async fn a_node_adopted_from_the_go_operator_is_undone_as_it_would_and_says_so(backend: Backend) {
    // The Go operator's marks on the node, and its maintenance of it.
    let mut env = TestEnv::on(backend)
        .budgeted_nodes(1, 0)
        .patched_node(
            "node-0",
            json!({
                "metadata": {"labels": {EXCLUDE_LABEL: "true"}},
                "spec": {
                    "unschedulable": true,
                    "taints": [
                        {"key": DRAIN_TAINT_KEY, "effect": "NoSchedule"},
                        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                    ],
                },
            }),
        )
        .object(json!({
            "apiVersion": "nodemaintenance.medik8s.io/v1beta1",
            "kind": "NodeMaintenance",
            "metadata": {"name": "nm-0", "finalizers": ["foregroundDeleteNodeMaintenance"]},
            "spec": {"nodeName": "node-0", "reason": "the Go operator's"},
            "status": {"phase": "Running", "drainProgress": 100, "totalpods": 0, "evictionPods": 0},
        }))
        .start()
        .await;
    env.wait_condition_reason(
        "the prior state to be recorded as unknown",
        Duration::from_secs(20),
        "nm-0",
        "PriorStateRecorded",
        "PriorStateUnknown",
    )
    .await;
    assert_eq!(
        record_of(&env.node("node-0").await).expect("a record")["priorUnknown"],
        true
    );
    env.end_maintenance("nm-0").await;
    let after = env.node("node-0").await;
    assert_ne!(after["spec"]["unschedulable"], true, "{after}");
    assert!(taint_keys(&after).is_empty(), "{after}");
    assert!(
        after["metadata"]["labels"][EXCLUDE_LABEL].is_null(),
        "{after}"
    );
    assert_eq!(record_of(&after), None, "{after}");
    env.wait_event(
        "a Warning event on the node",
        "node-0",
        "PriorStateUnknown",
        &["not known"],
    )
    .await;
    env.stop_cleanly().await;
}

both_backends!(
    a_stale_record_of_another_maintenance_is_never_reused,
    a_record_lost_or_garbled_mid_maintenance_is_written_again_from_the_copy,
    a_node_adopted_from_the_go_operator_is_undone_as_it_would_and_says_so,
);
