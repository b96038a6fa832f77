//! PATCH bodies: JSON patch, JSON merge patch, strategic merge patch (for the fields and lists nmo
//! and kubectl patch), and a simplified server-side apply.

use serde_json::{Map, Value};

use crate::errors::ApiError;

/// The patch flavours, by Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchType {
    /// From a Content-Type header.
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct.split(';').next().unwrap_or_default().trim();
        match base {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

/// The media types a resource accepts for PATCH (custom resources have no strategic merge).
pub fn accepted_patch_types(custom: bool) -> Vec<&'static str> {
    let mut v = vec![
        "application/json-patch+json",
        "application/merge-patch+json",
    ];
    if !custom {
        v.push("application/strategic-merge-patch+json");
    }
    v.push("application/apply-patch+yaml");
    v
}

/// Applies a JSON patch (RFC 6902) with the semantics of the Go library the API server uses
/// (evanphx/json-patch): a `test` for `null` passes when the member is missing (the Go operator
/// tests an absent taint list this way, kube-runtime's finalizer helper an absent finalizer
/// list). A failing operation, including a failed `test`, is a 422 with the real server's
/// generic message and the library's own text in a cause (clients, nmo included, read it), and
/// changes nothing.
pub fn json_patch(doc: &Value, body: &[u8]) -> Result<Value, ApiError> {
    let p: json_patch::Patch =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let invalid = |text: String| {
        ApiError::new(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
        )
        // The real server says which op failed only in its log: its body has no causes.
        .with_details({
            tracing::debug!(%text, "JSON patch refused");
            serde_json::json!({})
        })
    };
    let mut out = doc.clone();
    for op in p.0 {
        if let json_patch::PatchOperation::Test(t) = &op {
            let path = t.path.as_str();
            let failed = || invalid(format!("testing value {path} failed: test failed"));
            if t.value.is_null() {
                let parent = path.rsplit_once('/').map_or("", |(a, _)| a);
                let parent_exists = parent.is_empty() || out.pointer(parent).is_some();
                match out.pointer(path) {
                    None if parent_exists => continue,
                    Some(Value::Null) => continue,
                    _ => return Err(failed()),
                }
            }
            json_patch::patch(&mut out, std::slice::from_ref(&op)).map_err(|_| failed())?;
            continue;
        }
        json_patch::patch(&mut out, std::slice::from_ref(&op))
            .map_err(|e| invalid(format!("{} operation does not apply: {e}", op_name(&op))))?;
    }
    Ok(out)
}

fn op_name(op: &json_patch::PatchOperation) -> &'static str {
    match op {
        json_patch::PatchOperation::Add(_) => "add",
        json_patch::PatchOperation::Remove(_) => "remove",
        json_patch::PatchOperation::Replace(_) => "replace",
        json_patch::PatchOperation::Move(_) => "move",
        json_patch::PatchOperation::Copy(_) => "copy",
        json_patch::PatchOperation::Test(_) => "test",
    }
}

/// Applies a JSON merge patch (RFC 7386).
pub fn merge_patch(doc: &Value, body: &[u8]) -> Result<Value, ApiError> {
    let p: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    if !p.is_object() {
        return Err(ApiError::bad_request("patch body must be a JSON object"));
    }
    let mut out = doc.clone();
    json_patch::merge(&mut out, &p);
    Ok(out)
}

/// The merge key of a list field, as the built-in types declare it (`patchMergeKey`). `None` for
/// lists that are replaced atomically (e.g. `spec.taints`, `tolerations`).
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "containerStatuses"
        | "initContainerStatuses"
        | "ephemeralContainerStatuses" => "name",
        "ports" => "containerPort",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "conditions" | "addresses" => "type",
        "ownerReferences" => "uid",
        "hostAliases" | "podIPs" | "hostIPs" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        _ => return None,
    })
}

/// Primitive lists with `patchStrategy: merge` (union instead of replace).
fn merges_primitives(field: &str) -> bool {
    field == "finalizers"
}

/// Applies a strategic merge patch.
pub fn strategic_merge(doc: &Value, body: &[u8]) -> Result<Value, ApiError> {
    let p: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let Value::Object(pm) = p else {
        return Err(ApiError::bad_request("patch body must be a JSON object"));
    };
    let mut out = doc.clone();
    match &mut out {
        Value::Object(dm) => merge_map(dm, &pm)?,
        other => *other = Value::Object(strip_directives(&pm)),
    }
    Ok(out)
}

/// A simplified server-side apply: the applied configuration is merged like a strategic merge
/// patch (lists with merge keys merged by key, other lists replaced). Field ownership is not
/// tracked, so fields a manager stops applying are not removed.
pub fn apply(doc: &Value, applied: &Value) -> Result<Value, ApiError> {
    let Value::Object(pm) = applied else {
        return Err(ApiError::bad_request(
            "apply configuration must be an object",
        ));
    };
    let mut out = doc.clone();
    if let Value::Object(dm) = &mut out {
        merge_map(dm, pm)?;
    }
    Ok(out)
}

fn strip_directives(m: &Map<String, Value>) -> Map<String, Value> {
    m.iter()
        .filter(|(k, _)| !k.starts_with('$'))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn merge_map(doc: &mut Map<String, Value>, patch: &Map<String, Value>) -> Result<(), ApiError> {
    if map_directive(doc, patch)? {
        return Ok(());
    }
    for (k, pv) in patch {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(del)) = (doc.get_mut(field), pv) {
                list.retain(|x| !del.contains(x));
            }
            continue;
        }
        if k.starts_with("$setElementOrder/") || k == "$retainKeys" {
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        merge_field(doc, k, pv)?;
    }
    if let Some(Value::Array(keep)) = patch.get("$retainKeys") {
        let keep: Vec<&str> = keep.iter().filter_map(|v| v.as_str()).collect();
        doc.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(())
}

/// A map's `$patch` directive applied: true when it did the whole patch (replace, delete).
fn map_directive(
    doc: &mut Map<String, Value>,
    patch: &Map<String, Value>,
) -> Result<bool, ApiError> {
    match patch.get("$patch").and_then(|v| v.as_str()) {
        Some("replace") => {
            *doc = strip_directives(patch);
            Ok(true)
        }
        Some("delete") => {
            doc.clear();
            Ok(true)
        }
        Some(other) => Err(ApiError::bad_request(format!(
            "unknown patch type: {other}"
        ))),
        None => Ok(false),
    }
}

/// Field `k` of `doc` patched with `pv`: null removes it, maps merge, lists merge by their
/// strategy, anything else replaces.
fn merge_field(doc: &mut Map<String, Value>, k: &str, pv: &Value) -> Result<(), ApiError> {
    match pv {
        Value::Null => {
            doc.remove(k);
        }
        Value::Object(pm) => {
            if pm.get("$patch").and_then(|v| v.as_str()) == Some("delete") {
                doc.remove(k);
                return Ok(());
            }
            match doc.get_mut(k) {
                Some(Value::Object(dm)) => merge_map(dm, pm)?,
                _ => {
                    let mut fresh = Map::new();
                    merge_map(&mut fresh, pm)?;
                    doc.insert(k.to_string(), Value::Object(fresh));
                }
            }
        }
        Value::Array(pl) => {
            let merged = merge_list(k, doc.get(k), pl)?;
            doc.insert(k.to_string(), merged);
        }
        other => {
            doc.insert(k.to_string(), other.clone());
        }
    }
    Ok(())
}

fn merge_list(field: &str, current: Option<&Value>, patch: &[Value]) -> Result<Value, ApiError> {
    let cur: Vec<Value> = current
        .and_then(|v| v.as_array())
        .cloned()
        .unwrap_or_default();
    if merges_primitives(field) {
        let mut out = cur;
        for v in patch {
            if !out.contains(v) {
                out.push(v.clone());
            }
        }
        return Ok(Value::Array(out));
    }
    let Some(key) = merge_key(field) else {
        // Atomic list: replaced as a whole.
        return Ok(Value::Array(patch.to_vec()));
    };
    if patch
        .iter()
        .any(|p| p.get("$patch").and_then(|v| v.as_str()) == Some("replace"))
    {
        return Ok(Value::Array(
            patch
                .iter()
                .filter(|p| p.get("$patch").is_none())
                .cloned()
                .collect(),
        ));
    }
    merge_by_key(field, key, cur, patch).map(Value::Array)
}

/// A list of objects merged by their merge key `key`: each patch item merges into the item of
/// its key (`$patch: delete` removes it), or is added.
fn merge_by_key(
    field: &str,
    key: &str,
    mut out: Vec<Value>,
    patch: &[Value],
) -> Result<Vec<Value>, ApiError> {
    for p in patch {
        let Value::Object(pm) = p else {
            return Err(ApiError::bad_request(format!(
                "unable to find api field in struct for the list {field}: items must be objects"
            )));
        };
        let Some(kv) = pm.get(key) else {
            return Err(ApiError::bad_request(format!(
                "map: {pm:?} does not contain declared merge key: {key}"
            )));
        };
        let pos = out.iter().position(|x| x.get(key) == Some(kv));
        if pm.get("$patch").and_then(|v| v.as_str()) == Some("delete") {
            if let Some(i) = pos {
                out.remove(i);
            }
            continue;
        }
        match pos {
            Some(i) => {
                if let Value::Object(dm) = &mut out[i] {
                    merge_map(dm, pm)?;
                }
            }
            None => {
                let mut fresh = Map::new();
                merge_map(&mut fresh, pm)?;
                out.push(Value::Object(fresh));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merges_containers_by_name_and_replaces_taints() {
        let doc = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}],
                          "taints": [{"key": "k1", "effect": "NoSchedule"}]}});
        let patch = json!({"spec": {"containers": [{"name": "b", "image": "z"}],
                            "taints": [{"key": "k2", "effect": "NoSchedule"}]}});
        let out = strategic_merge(&doc, patch.to_string().as_bytes()).unwrap();
        assert_eq!(out["spec"]["containers"][0]["image"], "x");
        assert_eq!(out["spec"]["containers"][1]["image"], "z");
        assert_eq!(
            out["spec"]["taints"],
            json!([{"key": "k2", "effect": "NoSchedule"}])
        );
    }

    #[test]
    fn strategic_directives() {
        let doc = json!({"metadata": {"finalizers": ["a", "b"], "labels": {"x": "1", "y": "2"}},
                         "spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "labels": {"x": null}},
                           "spec": {"containers": [{"name": "a", "$patch": "delete"}],
                                    "$setElementOrder/containers": [{"name": "b"}]}});
        let out = strategic_merge(&doc, patch.to_string().as_bytes()).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
        assert_eq!(out["metadata"]["labels"], json!({"y": "2"}));
        assert_eq!(out["spec"]["containers"], json!([{"name": "b"}]));
    }

    #[test]
    fn test_for_null_passes_on_a_missing_path_like_go() {
        let doc = json!({"metadata": {"name": "x"}});
        let patch = json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
                           {"op": "add", "path": "/metadata/finalizers", "value": ["f"]}]);
        let out = json_patch(&doc, patch.to_string().as_bytes()).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["f"]));
        let patch = json!([{"op": "test", "path": "/metadata/name", "value": null}]);
        assert!(json_patch(&doc, patch.to_string().as_bytes()).is_err());
    }

    #[test]
    fn failing_test_op_is_422() {
        let doc = json!({"spec": {"taints": []}});
        let patch = json!([{"op": "test", "path": "/spec/taints", "value": [{"key": "x"}]},
                           {"op": "replace", "path": "/spec/taints", "value": []}]);
        let err = json_patch(&doc, patch.to_string().as_bytes()).unwrap_err();
        assert_eq!(err.code, 422);
    }
}
