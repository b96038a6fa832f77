//! The body of a status write: a JSON patch that lands only over the status its writer last
//! saw, made of the status's fields as serialized.
//!
//! Its first ops test the object's uid (a NodeMaintenance deleted and created again under the
//! same name is another object) and the status as its writer last saw it: its
//! `statusRevision`, or, when the writer saw no status at all, that there is none. So a write
//! that arrives late, after another replica's, fails (the API server answers 422) instead of
//! undoing it. Then, over a status that exists, one `add` per field nmo knows, and a removal
//! of each known field the new status leaves out: fields nmo does not know (a newer nmo's) stay
//! as they are. Over an absent status, one `add` of the whole status.
//!
//! Built from the status serialized once, its fields kept as raw JSON text: a
//! `serde_json::Value` tree of the status costs several times its JSON (a map per pending pod)
//! and lives as long as the write is in flight: at 500 maintenances writing at once, that was
//! 8 MiB at b2000's peak.

use std::collections::BTreeMap;

use nmo_actors::model::StatusPrecondition;
use serde::Serialize;
use serde_json::value::RawValue;

use crate::crd::NodeMaintenanceStatus;

/// Every status field nmo writes, by its JSON name (checked against the CRD's schema by a
/// test): each one is either written or removed by a status write.
pub(crate) const STATUS_FIELDS: [&str; 17] = [
    "phase",
    "drainProgress",
    "lastUpdate",
    "lastError",
    "pendingPods",
    "pendingPodsRefs",
    "totalpods",
    "evictionPods",
    "errorOnLeaseCount",
    "pendingPodsReasons",
    "conditions",
    "drainStartTime",
    "drainDeadline",
    "drainTimeRemaining",
    "queue",
    "statusRevision",
    "nodeRecord",
];

/// One JSON patch operation; `value` is raw JSON text.
#[derive(Serialize)]
struct Op<'a> {
    op: &'static str,
    path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a RawValue>,
}

impl<'a> Op<'a> {
    fn new(op: &'static str, path: impl Into<String>, value: Option<&'a RawValue>) -> Self {
        Op {
            op,
            path: path.into(),
            value,
        }
    }
}

/// The JSON patch (as bytes) that writes `status` over the status `seen` of the object with
/// uid `uid`.
pub fn body(
    uid: &str,
    seen: StatusPrecondition,
    status: &NodeMaintenanceStatus,
) -> Result<Vec<u8>, serde_json::Error> {
    let text = serde_json::to_string(status)?;
    let uid = serde_json::value::to_raw_value(uid)?;
    let null = serde_json::value::to_raw_value(&())?;
    let mut ops = vec![Op::new("test", "/metadata/uid", Some(&uid))];
    let revision = match seen {
        StatusPrecondition::Absent => None,
        StatusPrecondition::Revision(revision) => Some(revision),
    };
    let seen_revision = match revision {
        Some(Some(revision)) => Some(serde_json::value::to_raw_value(&revision)?),
        _ => None,
    };
    let whole: Box<RawValue>;
    match revision {
        None => {
            // No status seen: there must be none, and the whole status is added.
            ops.push(Op::new("test", "/status", Some(&null)));
            whole = RawValue::from_string(text)?;
            ops.push(Op::new("add", "/status", Some(&whole)));
            return serde_json::to_vec(&ops);
        }
        Some(_) => ops.push(Op::new(
            "test",
            "/status/statusRevision",
            Some(seen_revision.as_deref().unwrap_or(&null)),
        )),
    }
    let fields: BTreeMap<&str, &RawValue> = serde_json::from_str(&text)?;
    for name in STATUS_FIELDS {
        let path = format!("/status/{name}");
        match fields.get(name) {
            Some(value) => ops.push(Op::new("add", path, Some(value))),
            None => {
                // Add then remove: removing a field that is already absent is not an error.
                ops.push(Op::new("add", path.clone(), Some(&null)));
                ops.push(Op::new("remove", path, None));
            }
        }
    }
    serde_json::to_vec(&ops)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::crd::{MaintenancePhase, QueueStatus};

    fn status(queue: Option<QueueStatus>, revision: Option<i64>) -> NodeMaintenanceStatus {
        NodeMaintenanceStatus {
            phase: Some(MaintenancePhase::Running),
            queue,
            status_revision: revision,
            ..NodeMaintenanceStatus::default()
        }
    }

    /// Applies `patch` with the JSON patch semantics the API server uses (a `test` of null
    /// passes on a missing member).
    fn apply(document: &Value, patch: &[u8]) -> Result<Value, String> {
        let patch: Vec<Value> = serde_json::from_slice(patch).map_err(|e| e.to_string())?;
        let mut out = document.clone();
        for op in patch {
            if op["op"] == "test" && op["value"].is_null() {
                let path = op["path"].as_str().unwrap_or_default();
                let parent = path.rsplit_once('/').map_or("", |(a, _)| a);
                let absent = out.pointer(path).is_none_or(Value::is_null);
                if absent && (parent.is_empty() || out.pointer(parent).is_some()) {
                    continue;
                }
                return Err(format!("test of {path} failed"));
            }
            let op: json_patch::PatchOperation =
                serde_json::from_value(op).map_err(|e| e.to_string())?;
            json_patch::patch(&mut out, &[op]).map_err(|e| e.to_string())?;
        }
        Ok(out)
    }

    fn object(status: Option<Value>) -> Value {
        let mut object = json!({"metadata": {"name": "nm-0", "uid": "u1"}, "spec": {}});
        if let Some(status) = status {
            object["status"] = status;
        }
        object
    }

    #[test]
    fn the_fields_written_are_every_status_field_of_the_crd() {
        let crd = serde_json::to_value(crate::crd::definition()).expect("serializes");
        let properties = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
            ["properties"];
        let mut schema: Vec<&str> = properties
            .as_object()
            .expect("status properties")
            .keys()
            .map(String::as_str)
            .collect();
        let mut written = STATUS_FIELDS.to_vec();
        schema.sort_unstable();
        written.sort_unstable();
        assert_eq!(schema, written);
    }

    #[test]
    fn a_first_status_lands_only_where_there_is_none() {
        let body = body("u1", StatusPrecondition::Absent, &status(None, Some(1))).expect("body");
        let written = apply(&object(None), &body).expect("lands");
        assert_eq!(
            written["status"],
            json!({"phase": "Running", "statusRevision": 1})
        );
        assert!(
            apply(&object(Some(json!({"phase": "Succeeded"}))), &body).is_err(),
            "a status written meanwhile is not overwritten"
        );
    }

    #[test]
    fn a_write_lands_only_over_the_revision_it_saw_and_keeps_unknown_fields() {
        let current = object(Some(json!({
            "phase": "Succeeded",
            "statusRevision": 8,
            "queue": {"position": 2},
            "futureField": "kept",
        })));
        let late = body(
            "u1",
            StatusPrecondition::Revision(Some(7)),
            &status(None, Some(8)),
        )
        .expect("body");
        assert!(apply(&current, &late).is_err(), "a late write is refused");
        let fresh = body(
            "u1",
            StatusPrecondition::Revision(Some(8)),
            &status(None, Some(9)),
        )
        .expect("body");
        let written = apply(&current, &fresh).expect("lands");
        assert_eq!(written["status"]["phase"], "Running");
        assert_eq!(written["status"]["statusRevision"], 9);
        assert_eq!(written["status"]["futureField"], "kept");
        assert!(
            written["status"].get("queue").is_none(),
            "a known field left out is removed: {written}"
        );
        let other = body(
            "u2",
            StatusPrecondition::Revision(Some(8)),
            &status(None, Some(9)),
        )
        .expect("body");
        assert!(
            apply(&current, &other).is_err(),
            "another object of that name is not written"
        );
    }

    #[test]
    fn a_status_without_a_revision_is_written_over_once() {
        // The Go operator's status has no revision.
        let current = object(Some(json!({"phase": "Running", "drainProgress": 50})));
        let over = body(
            "u1",
            StatusPrecondition::Revision(None),
            &status(Some(QueueStatus::default()), Some(1)),
        )
        .expect("body");
        let written = apply(&current, &over).expect("lands");
        assert_eq!(written["status"]["statusRevision"], 1);
        assert_eq!(written["status"]["queue"], json!({"position": 0}));
        assert!(written["status"].get("drainProgress").is_none());
        assert!(apply(&written, &over).is_err(), "not twice");
    }
}
