//! Per-resource behaviours of the real API server's registry strategies that the simulator
//! follows: which kinds keep a `metadata.generation`, which refuse an update without a
//! resourceVersion, which answer a DELETE with the deleted object rather than a `Status`, and
//! the status fields the server fills in on a status write. Each was found by the fidelity
//! suite (tests/it/fidelity) against kube-apiserver 1.36.

use serde_json::{Value, json};

use crate::resources::{ResourceDef, names};

fn is(def: &ResourceDef, kind: (&str, &str)) -> bool {
    (def.group.as_str(), def.plural.as_str()) == kind
}

/// Whether objects of `def` keep a `metadata.generation` (bumped when their spec changes or
/// their deletion starts): custom resources and the built-ins with a spec to track. Leases,
/// events, nodes and namespaces have none.
pub fn tracks_generation(def: &ResourceDef) -> bool {
    def.custom
        || [
            names::PODS,
            names::PDBS,
            names::REPLICASETS,
            names::DAEMONSETS,
            names::CRDS,
        ]
        .iter()
        .any(|kind| is(def, *kind))
}

/// Bumps the generation of `v` (an object of `def`) if its kind keeps one.
pub fn bump_generation(def: &ResourceDef, v: &mut Value) {
    if !tracks_generation(def) {
        return;
    }
    let generation = v
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    v["metadata"]["generation"] = json!(generation + 1);
}

/// Whether a PUT of `def` may leave out the resourceVersion: not for Leases, whose holders
/// must never overwrite each other blindly (custom resources are checked where they are
/// updated).
pub fn allows_unconditional_update(def: &ResourceDef) -> bool {
    !is(def, names::LEASES)
}

/// Whether a DELETE that removes the object at once answers with the object (pods,
/// namespaces, CRDs) rather than a `Status` naming it (every other kind, custom resources
/// included).
pub fn returns_deleted_object(def: &ResourceDef) -> bool {
    is(def, names::PODS) || is(def, names::NAMESPACES) || is(def, names::CRDS)
}

/// What the server fills in on a status write: a pod's `podIPs` from its `podIP`, and each
/// container status's `lastState` (an empty struct the Go types always serialize).
pub fn default_status(def: &ResourceDef, v: &mut Value) {
    if !is(def, names::PODS) {
        return;
    }
    let Some(status) = v.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(ip) = status.get("podIP").cloned().filter(|ip| ip.is_string())
        && status.get("podIPs").is_none_or(Value::is_null)
    {
        status.insert("podIPs".into(), json!([{"ip": ip}]));
    }
    for list in ["containerStatuses", "initContainerStatuses"] {
        if let Some(statuses) = status.get_mut(list).and_then(Value::as_array_mut) {
            for container in statuses {
                if container.get("lastState").is_none() {
                    container["lastState"] = json!({});
                }
            }
        }
    }
}
