//! The NodeMaintenance type against what the Go operator writes, and deploy/base/crd.yaml against the type.

use nmo::crd::{MaintenancePhase, NodeMaintenance};
use serde_json::Value;

const GO_OBJECT: &str = include_str!("../fixtures/nodemaintenance-go.json");

#[test]
fn an_object_written_by_the_go_operator_round_trips_unchanged() {
    let original: Value = serde_json::from_str(GO_OBJECT).expect("fixture is JSON");
    let typed: NodeMaintenance = serde_json::from_value(original.clone()).expect("fixture parses");

    let status = typed.status.as_ref().expect("fixture has a status");
    assert_eq!(typed.spec.node_name, "worker-1");
    assert_eq!(status.phase, Some(MaintenancePhase::Running));
    assert_eq!(status.total_pods, Some(7));
    assert_eq!(status.eviction_pods, Some(5));
    assert_eq!(status.error_on_lease_count, Some(1));
    assert_eq!(status.pending_pods_refs.as_ref().map(Vec::len), Some(2));

    let written = serde_json::to_value(&typed).expect("serializes");
    assert_eq!(
        written, original,
        "field names or values changed on the way through"
    );
}

#[test]
fn unknown_fields_are_tolerated_on_read_and_never_written_back() {
    let mut object: Value = serde_json::from_str(GO_OBJECT).expect("fixture is JSON");
    object["status"]["someFutureField"] = Value::from("from a newer operator");
    object["spec"]["anotherFutureField"] = Value::from(3);

    let typed: NodeMaintenance =
        serde_json::from_value(object).expect("unknown fields are tolerated");
    let written = serde_json::to_value(&typed).expect("serializes");

    // Ignored, not echoed: nmo writes status field by field, only the fields it knows, so the
    // server keeps what nmo does not understand.
    assert!(written["status"].get("someFutureField").is_none());
    assert!(written["spec"].get("anotherFutureField").is_none());
}

#[test]
fn the_crd_uses_the_go_operators_names() {
    let crd = nmo::crd::definition();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("nodemaintenances.nodemaintenance.medik8s.io")
    );
    assert_eq!(crd.spec.group, "nodemaintenance.medik8s.io");
    assert_eq!(crd.spec.scope, "Cluster");
    assert_eq!(crd.spec.names.kind, "NodeMaintenance");
    assert_eq!(crd.spec.names.short_names, Some(vec!["nm".to_string()]));

    let version = &crd.spec.versions[0];
    assert_eq!(version.name, "v1beta1");
    assert!(
        version
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some()
    );

    let schema = serde_json::to_value(&version.schema).expect("schema serializes");
    let properties = &schema["openAPIV3Schema"]["properties"];
    let field_names = |section: &str| -> Vec<String> {
        properties[section]["properties"]
            .as_object()
            .map(|fields| fields.keys().cloned().collect())
            .unwrap_or_default()
    };
    for name in ["nodeName", "reason"] {
        assert!(
            field_names("spec").contains(&name.to_string()),
            "spec.{name} missing"
        );
    }
    for name in [
        "phase",
        "drainProgress",
        "lastUpdate",
        "lastError",
        "pendingPods",
        "pendingPodsRefs",
        "totalpods",
        "evictionPods",
        "errorOnLeaseCount",
    ] {
        assert!(
            field_names("status").contains(&name.to_string()),
            "status.{name} missing"
        );
    }
    let required = &properties["spec"]["required"];
    assert_eq!(required, &serde_json::json!(["nodeName"]));

    let columns = |wide: bool| -> Vec<&str> {
        version
            .additional_printer_columns
            .iter()
            .flatten()
            .filter(|column| (column.priority.unwrap_or(0) > 0) == wide)
            .map(|column| column.name.as_str())
            .collect()
    };
    assert_eq!(
        columns(false),
        ["Node", "Phase", "Progress", "Reason", "Age"]
    );
    // `kubectl get -o wide` adds nmo's.
    assert_eq!(columns(true), ["Queue", "Waiting For", "Blocked", "Error"]);
}

#[test]
fn deploy_crd_yaml_is_what_nmo_crd_prints() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/base/crd.yaml");
    let on_disk = std::fs::read_to_string(path).expect("deploy/base/crd.yaml is readable");
    let generated = nmo::crd::definition_yaml().expect("CRD renders");
    assert!(
        on_disk == generated,
        "deploy/base/crd.yaml drifted from the Rust type: regenerate it with `cargo run -- crd > deploy/base/crd.yaml`"
    );
}
