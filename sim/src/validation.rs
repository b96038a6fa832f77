//! The built-in validation the simulator does for objects of built-in kinds: only the checks
//! a client such as nmo or kubectl is likely to meet (a real API server validates every field;
//! see the crate docs), each with the real server's 422 body. Custom resources are validated
//! against their schema (`schema`).

use serde_json::Value;

use crate::errors::ApiError;
use crate::resources::{ResourceDef, names};

/// One failed check: (reason, field path, message), as `ApiError::invalid` takes them.
type Cause = (String, String, String);

fn required(field: &str) -> Cause {
    (
        "FieldValueRequired".into(),
        field.into(),
        "Required value".into(),
    )
}

/// The pod's required fields: at least one container, each with a name and an image.
fn pod_causes(pod: &Value) -> Vec<Cause> {
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if containers.is_empty() {
        return vec![required("spec.containers")];
    }
    let mut causes = Vec::new();
    for (i, container) in containers.iter().enumerate() {
        for field in ["name", "image"] {
            let empty = container
                .get(field)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
            if empty {
                causes.push(required(&format!("spec.containers[{i}].{field}")));
            }
        }
    }
    causes
}

/// A Lease's duration, when given, is positive.
fn lease_causes(lease: &Value) -> Vec<Cause> {
    match lease
        .pointer("/spec/leaseDurationSeconds")
        .and_then(Value::as_i64)
    {
        Some(seconds) if seconds <= 0 => vec![(
            "FieldValueInvalid".into(),
            "spec.leaseDurationSeconds".into(),
            format!("Invalid value: {seconds}: must be greater than 0"),
        )],
        _ => Vec::new(),
    }
}

/// An event (in its stored, core/v1 form) about a cluster-scoped object lives in `default`
/// (or nowhere); about a namespaced one, in that object's namespace.
fn event_causes(event: &Value) -> Vec<Cause> {
    let namespace = event
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let involved = event
        .pointer("/involvedObject/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let fits = if involved.is_empty() {
        namespace.is_empty() || namespace == "default"
    } else {
        involved == namespace
    };
    if fits {
        Vec::new()
    } else {
        vec![(
            "FieldValueInvalid".into(),
            "involvedObject.namespace".into(),
            format!("Invalid value: \"{involved}\": does not match event.namespace"),
        )]
    }
}

/// What an events.k8s.io/v1 request must carry besides what every event does: an
/// `eventTime` (checked on the request, before it is stored as a core/v1 event).
pub fn events_api_causes(event: &Value) -> Vec<Cause> {
    let missing = event.get("eventTime").is_none_or(Value::is_null);
    if missing {
        vec![required("eventTime")]
    } else {
        Vec::new()
    }
}

/// The causes a built-in object of `def` (in its stored form) is refused for.
pub fn causes(def: &ResourceDef, object: &Value) -> Vec<Cause> {
    match (def.group.as_str(), def.plural.as_str()) {
        kind if kind == names::PODS => pod_causes(object),
        kind if kind == names::LEASES => lease_causes(object),
        kind if kind == names::EVENTS => event_causes(object),
        _ => Vec::new(),
    }
}

/// Refuses a built-in object that fails a check, with the real server's 422 body.
pub fn validate(def: &ResourceDef, name: &str, object: &Value) -> Result<(), ApiError> {
    refuse(def, name, causes(def, object))
}

/// `Err` with the real server's 422 body for `causes`, if any.
pub fn refuse(def: &ResourceDef, name: &str, causes: Vec<Cause>) -> Result<(), ApiError> {
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&def.group, &def.kind, name, causes))
    }
}

/// The fields of a pod's spec an update may change (the real `ValidatePodUpdate`): container
/// images, `activeDeadlineSeconds`, added tolerations, and `terminationGracePeriodSeconds`.
fn pod_spec_unchangeable(spec: &Value) -> Value {
    let mut spec = spec.clone();
    for list in ["containers", "initContainers"] {
        if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for container in containers {
                if let Some(fields) = container.as_object_mut() {
                    fields.remove("image");
                }
            }
        }
    }
    if let Some(fields) = spec.as_object_mut() {
        for field in [
            "activeDeadlineSeconds",
            "tolerations",
            "terminationGracePeriodSeconds",
        ] {
            fields.remove(field);
        }
    }
    spec
}

/// Refuses an update of a built-in object that changes what may not change: a pod's spec
/// beyond [`pod_spec_unchangeable`], with the real server's 422 (whose message also carries
/// a diff of the two specs, which this one does not).
pub fn validate_update(
    def: &ResourceDef,
    name: &str,
    old: &Value,
    new: &Value,
) -> Result<(), ApiError> {
    if (def.group.as_str(), def.plural.as_str()) != names::PODS {
        return validate(def, name, new);
    }
    let spec = |v: &Value| pod_spec_unchangeable(v.get("spec").unwrap_or(&Value::Null));
    if spec(old) != spec(new) {
        return refuse(
            def,
            name,
            vec![(
                "FieldValueForbidden".into(),
                "spec".into(),
                "Forbidden: pod updates may not change fields other than \
                 `spec.containers[*].image`,`spec.initContainers[*].image`,\
                 `spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing \
                 tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if \
                 it was previously negative)"
                    .into(),
            )],
        );
    }
    validate(def, name, new)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_event_about_a_cluster_scoped_object_lives_in_default() {
        let event = |ns: &str, involved: Option<&str>| {
            let mut e = json!({"metadata": {"namespace": ns}, "involvedObject": {"kind": "Node"}});
            if let Some(i) = involved {
                e["involvedObject"]["namespace"] = json!(i);
            }
            e
        };
        assert!(event_causes(&event("default", None)).is_empty());
        assert_eq!(event_causes(&event("apps", None)).len(), 1);
        assert!(event_causes(&event("apps", Some("apps"))).is_empty());
        assert_eq!(event_causes(&event("apps", Some("other"))).len(), 1);
    }

    #[test]
    fn a_pod_update_may_change_images_but_not_the_node() {
        let pod = json!({"spec": {"nodeName": "a", "containers": [{"name": "c", "image": "i:1"}]}});
        let mut image = pod.clone();
        image["spec"]["containers"][0]["image"] = json!("i:2");
        assert_eq!(
            pod_spec_unchangeable(&pod["spec"]),
            pod_spec_unchangeable(&image["spec"])
        );
        let mut moved = pod.clone();
        moved["spec"]["nodeName"] = json!("b");
        assert_ne!(
            pod_spec_unchangeable(&pod["spec"]),
            pod_spec_unchangeable(&moved["spec"])
        );
    }

    #[test]
    fn a_pod_needs_containers_with_names_and_images() {
        assert_eq!(
            pod_causes(&json!({"spec": {}})),
            vec![required("spec.containers")]
        );
        assert_eq!(
            pod_causes(&json!({"spec": {"containers": [{"name": "a"}]}})),
            vec![required("spec.containers[0].image")]
        );
        assert!(
            pod_causes(&json!({"spec": {"containers": [{"name": "a", "image": "i"}]}})).is_empty()
        );
    }
}
