//! The JSON patch that labels, taints and cordons a node (and undoes it), and writes nmo's
//! record of what the node had before in the same patch (one atomic write: never a changed
//! node without its record, nor a record without the change).
//!
//! Its first ops test the taints and the resourceVersion nmo last read, so a concurrent change
//! by anyone else (another operator adding its own taint, say) fails the whole patch, which the
//! node actor retries from a fresh read: taints owned by others are never lost, and a patch
//! that arrives late (from a replica that lost its leadership) never undoes a newer change. An absent taint list is tested as `null`,
//! which the API server's JSON patch treats as "missing", as the Go operator relies on.

use nmo_actors::model::{NodePatch, RECORD_ANNOTATION, RecordWrite};
use serde_json::{Value, json};

use super::convert::kube_taint;

/// Escapes a map key for a JSON pointer (RFC 6901): label keys contain `/`.
fn pointer_escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The JSON patch document for `patch`.
pub fn json_patch(patch: &NodePatch) -> Value {
    let taints = |list: &[nmo_actors::model::Taint]| -> Value {
        if list.is_empty() {
            Value::Null
        } else {
            json!(list.iter().map(kube_taint).collect::<Vec<_>>())
        }
    };
    let mut ops = vec![
        json!({"op": "test", "path": "/spec/taints", "value": taints(&patch.expected_taints)}),
    ];
    if !patch.expected_version.is_empty() {
        ops.push(json!({
            "op": "test",
            "path": "/metadata/resourceVersion",
            "value": patch.expected_version,
        }));
    }
    if patch.desired_taints.is_empty() {
        // `remove` fails on an absent member, and an absent list was just tested for above.
        if !patch.expected_taints.is_empty() {
            ops.push(json!({"op": "remove", "path": "/spec/taints"}));
        }
    } else {
        ops.push(
            json!({"op": "add", "path": "/spec/taints", "value": taints(&patch.desired_taints)}),
        );
    }
    if let Some(unschedulable) = patch.unschedulable {
        // `add` creates or replaces the member, whether or not the server has it.
        ops.push(json!({"op": "add", "path": "/spec/unschedulable", "value": unschedulable}));
    }
    for (key, value) in &patch.labels {
        let path = format!("/metadata/labels/{}", pointer_escape(key));
        match value {
            Some(value) => ops.push(json!({"op": "add", "path": path, "value": value})),
            None => {
                // Add then remove: removing a label that is already gone is not an error.
                ops.push(json!({"op": "add", "path": path, "value": ""}));
                ops.push(json!({"op": "remove", "path": path}));
            }
        }
    }
    let record_path = format!(
        "/metadata/annotations/{}",
        pointer_escape(RECORD_ANNOTATION)
    );
    match &patch.record {
        RecordWrite::Keep => {}
        RecordWrite::Set {
            record,
            annotated: true,
        } => ops.push(json!({"op": "add", "path": record_path, "value": record.to_annotation()})),
        RecordWrite::Set {
            record,
            annotated: false,
        } => {
            // No annotation map to add a member to: create it, testing that it is still
            // absent (someone else's annotations added meanwhile are never overwritten).
            ops.push(json!({"op": "test", "path": "/metadata/annotations", "value": null}));
            ops.push(json!({
                "op": "add",
                "path": "/metadata/annotations",
                "value": {RECORD_ANNOTATION: record.to_annotation()},
            }));
        }
        RecordWrite::Remove => {
            // Add then remove: removing a record that is already gone is not an error.
            ops.push(json!({"op": "add", "path": record_path, "value": ""}));
            ops.push(json!({"op": "remove", "path": record_path}));
        }
    }
    Value::Array(ops)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use nmo_actors::model::{NodeRecord, Taint};

    use super::*;

    fn apply(document: &Value, patch: &Value) -> Result<Value, json_patch::PatchError> {
        let mut document = document.clone();
        let patch: json_patch::Patch = serde_json::from_value(patch.clone()).expect("valid patch");
        json_patch::patch(&mut document, &patch)?;
        Ok(document)
    }

    fn foreign() -> Taint {
        Taint {
            key: "example.com/gpu".into(),
            value: Some("true".into()),
            effect: "NoExecute".into(),
            time_added: None,
        }
    }

    #[test]
    fn begin_adds_our_taints_label_and_cordon_and_keeps_foreign_taints() {
        let node = json!({
            "metadata": {"labels": {"kubernetes.io/hostname": "w1"}},
            "spec": {"taints": [{"key": "example.com/gpu", "value": "true", "effect": "NoExecute"}]}
        });
        let desired = vec![foreign(), Taint::no_schedule("medik8s.io/drain")];
        let patch = NodePatch {
            node: "w1".into(),
            expected_taints: vec![foreign()],
            expected_version: String::new(),
            desired_taints: desired,
            unschedulable: Some(true),
            labels: BTreeMap::from([(
                "remediation.medik8s.io/exclude-from-remediation".to_string(),
                Some("true".to_string()),
            )]),
            record: RecordWrite::Keep,
        };
        let document = json_patch(&patch);
        assert_eq!(
            document[0]["op"], "test",
            "the first op guards against concurrent changes"
        );
        let patched = apply(&node, &document).expect("patch applies");
        assert_eq!(patched["spec"]["unschedulable"], true);
        assert_eq!(patched["spec"]["taints"].as_array().map(Vec::len), Some(2));
        assert_eq!(patched["spec"]["taints"][0]["key"], "example.com/gpu");
        assert_eq!(
            patched["metadata"]["labels"]["remediation.medik8s.io/exclude-from-remediation"],
            "true"
        );
    }

    #[test]
    fn undo_removes_the_taint_list_and_a_label_that_may_be_gone() {
        let node = json!({
            "metadata": {"labels": {"kubernetes.io/hostname": "w1"}},
            "spec": {"taints": [{"key": "medik8s.io/drain", "effect": "NoSchedule"}], "unschedulable": true}
        });
        let patch = NodePatch {
            node: "w1".into(),
            expected_taints: vec![Taint::no_schedule("medik8s.io/drain")],
            expected_version: String::new(),
            desired_taints: vec![],
            unschedulable: Some(false),
            labels: BTreeMap::from([(
                "remediation.medik8s.io/exclude-from-remediation".to_string(),
                None,
            )]),
            record: RecordWrite::Keep,
        };
        let patched = apply(&node, &json_patch(&patch)).expect("patch applies");
        assert!(patched["spec"].get("taints").is_none());
        assert_eq!(patched["spec"]["unschedulable"], false);
        assert_eq!(
            patched["metadata"]["labels"],
            json!({"kubernetes.io/hostname": "w1"})
        );
    }

    #[test]
    fn a_concurrent_taint_change_fails_the_patch() {
        let node = json!({
            "metadata": {"labels": {}},
            "spec": {"taints": [{"key": "someone.else/new", "effect": "NoSchedule"}]}
        });
        let patch = NodePatch {
            node: "w1".into(),
            expected_taints: vec![],
            expected_version: String::new(),
            desired_taints: vec![Taint::no_schedule("medik8s.io/drain")],
            unschedulable: Some(true),
            labels: BTreeMap::new(),
            record: RecordWrite::Keep,
        };
        assert!(apply(&node, &json_patch(&patch)).is_err());
    }

    fn record() -> NodeRecord {
        NodeRecord {
            maintenance: "uid-nm1".into(),
            cordoned: true,
            drain_taint: false,
            unschedulable_taint: false,
            label: false,
            prior_unknown: false,
        }
    }

    fn recording(annotated: bool) -> NodePatch {
        NodePatch {
            node: "w1".into(),
            expected_taints: vec![foreign()],
            expected_version: "7".into(),
            desired_taints: vec![foreign(), Taint::no_schedule("medik8s.io/drain")],
            unschedulable: None,
            labels: BTreeMap::new(),
            record: RecordWrite::Set {
                record: record(),
                annotated,
            },
        }
    }

    #[test]
    fn the_record_is_written_with_the_change_into_an_existing_or_new_annotation_map() {
        let taints = json!([{"key": "example.com/gpu", "value": "true", "effect": "NoExecute"}]);
        let annotated = json!({
            "metadata": {
                "resourceVersion": "7",
                "annotations": {"kubeadm.alpha.kubernetes.io/cri-socket": "x"},
            },
            "spec": {"taints": taints}
        });
        let patched = apply(&annotated, &json_patch(&recording(true))).expect("patch applies");
        let annotations = &patched["metadata"]["annotations"];
        assert_eq!(annotations["kubeadm.alpha.kubernetes.io/cri-socket"], "x");
        let written = annotations[RECORD_ANNOTATION].as_str().expect("recorded");
        assert_eq!(NodeRecord::from_annotation(written), Some(record()));
        assert_eq!(patched["spec"]["taints"][1]["key"], "medik8s.io/drain");

        // The API server tests an absent member as null; this JSON patch library needs it
        // spelled out.
        let bare = json!({
            "metadata": {"resourceVersion": "7", "annotations": null},
            "spec": {"taints": taints}
        });
        let patched = apply(&bare, &json_patch(&recording(false))).expect("patch applies");
        assert!(patched["metadata"]["annotations"][RECORD_ANNOTATION].is_string());
        // Someone annotated the node since it was read: the patch fails rather than drop it.
        assert!(apply(&annotated, &json_patch(&recording(false))).is_err());
    }

    #[test]
    fn undo_removes_the_record_even_if_it_is_gone_already() {
        let mut patch = recording(true);
        patch.record = RecordWrite::Remove;
        patch.desired_taints = vec![foreign()];
        let taints = json!([{"key": "example.com/gpu", "value": "true", "effect": "NoExecute"}]);
        let recorded = json!({
            "metadata": {
                "resourceVersion": "7",
                "annotations": {RECORD_ANNOTATION: record().to_annotation(), "a": "b"},
            },
            "spec": {"taints": taints}
        });
        let patched = apply(&recorded, &json_patch(&patch)).expect("patch applies");
        assert_eq!(patched["metadata"]["annotations"], json!({"a": "b"}));
        let gone = json!({
            "metadata": {"resourceVersion": "7", "annotations": {"a": "b"}},
            "spec": {"taints": taints}
        });
        assert!(apply(&gone, &json_patch(&patch)).is_ok());
        let changed = json!({
            "metadata": {"resourceVersion": "8", "annotations": {"a": "b"}},
            "spec": {"taints": taints}
        });
        assert!(
            apply(&changed, &json_patch(&patch)).is_err(),
            "a node changed since it was read, even with the same taints"
        );
    }
}
