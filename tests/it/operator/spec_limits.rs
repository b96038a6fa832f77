//! The limits of a NodeMaintenance's spec: the CRD's schema refuses what nmo cannot act on
//! (on the real API server, which runs the schema's CEL rules), and nmo itself fails, naming the
//! field, an object that got past a schema without them (created before it had them).

use std::time::Duration;

use serde_json::json;

use crate::support::{Backend, TestEnv, maintenance_object};

/// A node name that is no node's (empty, a path, too long), a reason of more than 1024
/// characters, a drain timeout beyond 720h or too large for Go: each refused at create; a
/// change of the node name refused at update. Real API server only: the simulator runs the
/// schema's patterns, not its lengths nor its CEL rules.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schema_refuses_a_spec_nmo_cannot_act_on() {
    let env = TestEnv::on(Backend::Real)
        .budgeted_nodes(1, 0)
        .start_idle()
        .await;
    let long_name = "n".repeat(254);
    let long_reason = "r".repeat(1025);
    let refused = [
        ("empty-node", json!({"nodeName": ""})),
        ("path-node", json!({"nodeName": "node-0/status"})),
        ("long-node", json!({"nodeName": long_name})),
        (
            "long-reason",
            json!({"nodeName": "node-0", "reason": long_reason}),
        ),
        (
            "huge-timeout",
            json!({"nodeName": "node-0", "drainTimeout": "99999999999999999999h"}),
        ),
        (
            "long-timeout",
            json!({"nodeName": "node-0", "drainTimeout": "721h"}),
        ),
    ];
    for (name, spec) in refused {
        let result = env
            .try_create_maintenance(maintenance_object(name, spec.clone()))
            .await;
        assert!(result.is_err(), "{name}: {spec} was accepted");
    }
    env.try_create_maintenance(maintenance_object(
        "fine",
        json!({"nodeName": "node-0", "reason": "r".repeat(1024), "drainTimeout": "720h"}),
    ))
    .await
    .expect("within the limits");
    let changed = env
        .patch_json_result::<nmo::crd::NodeMaintenance>(
            None,
            "fine",
            json!({"spec": {"nodeName": env.name("node-1")}}),
        )
        .await;
    let error = changed.expect_err("the node name is immutable").to_string();
    assert!(
        error.contains("updating spec.NodeName isn't allowed"),
        "{error}"
    );
}

/// NodeMaintenances the schema did not check (the simulator runs neither its lengths nor its
/// CEL rules, as a cluster whose CRD predates them): a drain timeout too large for Go and a
/// reason of 2,000 characters. Each is Failed at once with a `lastError` naming the field, and
/// its node is not touched (the Go duration used to mean no deadline at all, and the
/// maintenance Succeeded). Simulator only, for that reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_beyond_the_limits_fails_naming_the_field_and_touches_nothing() {
    let env = TestEnv::builder().nodes(2, 1).start().await;
    let cases = [
        (
            "huge-timeout",
            json!({"nodeName": "node-0", "drainTimeout": "99999999999999999999h"}),
            "spec.drainTimeout",
        ),
        (
            "long-reason",
            json!({"nodeName": "node-1", "reason": "r".repeat(2000)}),
            "spec.reason",
        ),
    ];
    for (name, spec, _) in &cases {
        env.try_create_maintenance(maintenance_object(name, spec.clone()))
            .await
            .expect("the simulator takes it");
    }
    for (name, _, field) in &cases {
        env.wait_failed(name).await;
        let status = env.status(name).await;
        let error = status["lastError"].as_str().unwrap_or_default();
        assert!(error.contains(field), "{name}: {error}");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for node in ["node-0", "node-1"] {
        let object = env.node(node).await;
        assert_ne!(object["spec"]["unschedulable"], true, "{node} was cordoned");
        assert!(env.lease(node).await.is_none(), "{node} was leased");
    }
    env.wait_event(
        "a Warning event naming the field",
        "huge-timeout",
        "FailedMaintenance",
        &["spec.drainTimeout"],
    )
    .await;
}
