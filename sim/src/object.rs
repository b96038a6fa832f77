//! One stored object: its serialized JSON plus the few parsed bits that selectors, indexes and
//! controllers need. A leaf module: the store keeps these, the selectors match them.

use bytes::Bytes;
use serde_json::Value;

use crate::errors::ApiError;
use crate::resources::ResourceDef;

/// (namespace, name); namespace is empty for cluster-scoped objects.
pub type Key = (String, String);

/// One stored object.
#[derive(Debug)]
pub struct StoredObject {
    /// The full object as JSON.
    pub json: Bytes,
    /// metadata.name.
    pub name: String,
    /// metadata.namespace ("" when cluster scoped).
    pub namespace: String,
    /// metadata.uid.
    pub uid: String,
    /// metadata.resourceVersion.
    pub rv: u64,
    /// metadata.labels.
    pub labels: Vec<(String, String)>,
    /// Values of the resource's extra selectable fields (aligned with `ResourceDef::fields`).
    pub fields: Vec<String>,
    /// uids of the owner references.
    pub owner_uids: Vec<String>,
    /// metadata.deletionTimestamp is set.
    pub deleting: bool,
    /// status.conditions has Ready=True (pods and nodes).
    pub ready: bool,
    /// uid of the owner reference with `controller: true`.
    pub controller_uid: Option<String>,
}

/// `metadata.labels` (a label whose value is not a string, as "").
fn labels(meta: Option<&Value>) -> Vec<(String, String)> {
    meta.and_then(|m| m.get("labels"))
        .and_then(|l| l.as_object())
        .map(|l| {
            l.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// `metadata.ownerReferences`.
fn owner_references(meta: Option<&Value>) -> &[Value] {
    meta.and_then(|m| m.get("ownerReferences"))
        .and_then(|o| o.as_array())
        .map_or(&[], |a| a.as_slice())
}

/// Its Ready condition is True.
fn is_ready(v: &Value) -> bool {
    v.pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .is_some_and(|c| {
            c.iter().any(|x| {
                x.get("type").and_then(|t| t.as_str()) == Some("Ready")
                    && x.get("status").and_then(|t| t.as_str()) == Some("True")
            })
        })
}

impl StoredObject {
    /// Builds the stored form of an object (serializes it).
    pub fn from_value(def: &ResourceDef, v: &Value) -> Result<Self, ApiError> {
        let meta = v.get("metadata");
        let text = |k: &str| {
            meta.and_then(|m| m.get(k))
                .and_then(|x| x.as_str())
                .unwrap_or_default()
                .to_string()
        };
        let uid_of = |o: &Value| o.get("uid").and_then(|u| u.as_str()).map(String::from);
        let owner_uids = owner_references(meta).iter().filter_map(uid_of).collect();
        let controller_uid = owner_references(meta)
            .iter()
            .find(|o| o.get("controller").and_then(|c| c.as_bool()) == Some(true))
            .and_then(uid_of);
        let json = serde_json::to_vec(v).map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(StoredObject {
            json: Bytes::from(json),
            name: text("name"),
            namespace: text("namespace"),
            uid: text("uid"),
            rv: text("resourceVersion").parse().unwrap_or(0),
            labels: labels(meta),
            fields: def.fields.iter().map(|f| field_value(v, f)).collect(),
            owner_uids,
            deleting: meta
                .and_then(|m| m.get("deletionTimestamp"))
                .is_some_and(|d| !d.is_null()),
            ready: is_ready(v),
            controller_uid,
        })
    }

    /// Parses the object.
    pub fn value(&self) -> Result<Value, ApiError> {
        serde_json::from_slice(&self.json).map_err(|e| ApiError::internal(e.to_string()))
    }

    /// The store key.
    pub fn key(&self) -> Key {
        (self.namespace.clone(), self.name.clone())
    }
}

/// Extracts a dotted field path as the string a field selector compares with.
pub fn field_value(v: &Value, path: &str) -> String {
    let mut cur = v;
    for seg in path.split('.') {
        match cur.get(seg) {
            Some(x) => cur = x,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}
