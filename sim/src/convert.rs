//! Conversion between events.k8s.io/v1 Events and the core/v1 Events they are stored as (the
//! real API server keeps both APIs on one storage, so `kubectl get events` shows what an
//! operator recorded through events.k8s.io).

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::object::StoredObject;
use crate::resources::ResourceDef;

/// (events.k8s.io/v1 field, core/v1 field).
const RENAMES: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn rename(v: &Value, api_version: &str, to_core: bool) -> Value {
    let Some(m) = v.as_object() else {
        return v.clone();
    };
    let mut out = Map::new();
    for (k, val) in m {
        let nk = RENAMES
            .iter()
            .find(|(a, b)| if to_core { a == k } else { b == k })
            .map(|(a, b)| if to_core { *b } else { *a })
            .unwrap_or(k.as_str());
        out.insert(nk.to_string(), val.clone());
    }
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!("Event"));
    Value::Object(out)
}

/// An object of `def` as it is stored.
pub fn to_storage(def: &ResourceDef, v: Value) -> Value {
    if def.converted {
        rename(&v, "v1", true)
    } else {
        v
    }
}

/// A stored object as `def` presents it.
pub fn from_storage(def: &ResourceDef, v: &Value) -> Value {
    if def.converted {
        rename(v, &def.api_version(), false)
    } else {
        v.clone()
    }
}

/// The JSON of a stored object as `def` presents it.
pub fn render(def: &ResourceDef, o: &StoredObject) -> Bytes {
    if !def.converted {
        return o.json.clone();
    }
    match serde_json::from_slice::<Value>(&o.json) {
        Ok(v) => Bytes::from(serde_json::to_vec(&from_storage(def, &v)).unwrap_or_default()),
        Err(_) => o.json.clone(),
    }
}
