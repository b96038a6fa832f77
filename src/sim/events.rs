//! The two event APIs over one set of events, as a real API server keeps them: an
//! `events.k8s.io/v1` Event written through the API is also readable as its `core/v1` form,
//! which is what `kubectl describe` and `kubectl get events` show. (Only this direction is
//! mirrored: nothing the simulator serves writes core events that new-API readers would need.)

use std::sync::Arc;

use serde_json::{Value, json};

use super::errors::ApiError;
use super::resources::{ResourceDef, names};
use super::rest::{Api, Sub};

/// Whether `def` is `events.k8s.io/v1` events.
pub fn is_new_api_event(def: &ResourceDef) -> bool {
    def.group == "events.k8s.io" && def.plural == "events"
}

/// The core/v1 form of an events.k8s.io/v1 Event.
pub fn to_core(event: &Value) -> Value {
    let event_time = event["eventTime"].as_str().unwrap_or_default();
    // core/v1 timestamps have second precision.
    let seconds = |time: &str| match time.split_once('.') {
        Some((whole, _)) => format!("{whole}Z"),
        None => time.to_string(),
    };
    let last = event["series"]["lastObservedTime"]
        .as_str()
        .unwrap_or(event_time);
    let count = event["series"]["count"].as_i64().unwrap_or(1);
    let mut core = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": event["metadata"]["name"],
            "namespace": event["metadata"]["namespace"],
        },
        "involvedObject": event["regarding"],
        "reason": event["reason"],
        "message": event["note"],
        "type": event["type"],
        "action": event["action"],
        "source": {"component": event["reportingController"]},
        "reportingComponent": event["reportingController"],
        "reportingInstance": event["reportingInstance"],
        "firstTimestamp": seconds(event_time),
        "lastTimestamp": seconds(last),
        "eventTime": event["eventTime"],
        "count": count,
    });
    if !event["related"].is_null() {
        core["related"] = event["related"].clone();
    }
    core
}

/// Writes the core/v1 form of `event` (creating or replacing it).
pub fn mirror_to_core(api: &Api, event: &Value) -> Result<(), ApiError> {
    let core_def: Arc<ResourceDef> = api.def(names::EVENTS)?;
    let namespace = event["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = event["metadata"]["name"].as_str().unwrap_or_default();
    let core = to_core(event);
    if api.store.get(&core_def, namespace, name).is_some() {
        api.update(&core_def, namespace, name, core, Sub::Main, false)?;
    } else {
        api.create(&core_def, namespace, core, false, false)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_api_event_reads_as_a_core_event() {
        let event = json!({
            "metadata": {"name": "nm-0.17", "namespace": "default"},
            "regarding": {"kind": "NodeMaintenance", "name": "nm-0", "uid": "u1"},
            "reason": "BeginMaintenance",
            "note": "Begin a node maintenance",
            "type": "Normal",
            "action": "BeginMaintenance",
            "reportingController": "nmo",
            "reportingInstance": "nmo-1",
            "eventTime": "2026-11-29T10:00:05.123456Z",
            "series": {"count": 3, "lastObservedTime": "2026-11-29T10:01:00.000001Z"}
        });
        let core = to_core(&event);
        assert_eq!(core["involvedObject"]["name"], "nm-0");
        assert_eq!(core["message"], "Begin a node maintenance");
        assert_eq!(core["firstTimestamp"], "2026-11-29T10:00:05Z");
        assert_eq!(core["lastTimestamp"], "2026-11-29T10:01:00Z");
        assert_eq!(core["count"], 3);
        assert_eq!(core["source"]["component"], "nmo");
    }
}
