//! `meta.k8s.io/v1` Table responses (what `kubectl get` asks for), with the columns the real
//! server's printers produce for the built-in kinds, and `additionalPrinterColumns` for custom
//! resources.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::object::StoredObject;
use crate::resources::ResourceDef;

/// What to embed in each row (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    /// No object.
    None,
    /// PartialObjectMetadata (the default).
    Metadata,
    /// The full object.
    Object,
}

/// A duration rendered like `kubectl` ages (apimachinery's HumanDuration).
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// Age of a timestamp field.
fn age(ts: Option<&Value>) -> Value {
    let Some(s) = ts.and_then(|t| t.as_str()) else {
        return json!("<unknown>");
    };
    match chrono::DateTime::parse_from_rfc3339(s) {
        Ok(t) => json!(human_duration(
            (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds()
        )),
        Err(_) => json!("<unknown>"),
    }
}

fn col(name: &str, ty: &str, format: &str, priority: i64, desc: &str) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": desc, "priority": priority})
}

/// A string column without a format.
fn text(name: &str, priority: i64, desc: &str) -> Value {
    col(name, "string", "", priority, desc)
}

/// An integer column without a format, always shown.
fn integer(name: &str, desc: &str) -> Value {
    col(name, "integer", "", 0, desc)
}

/// The Name column every kind starts (or, for events, ends) with.
fn name_column() -> Value {
    col(
        "Name",
        "string",
        "name",
        0,
        "Name must be unique within a namespace.",
    )
}

/// The Age column of the built-in kinds.
fn age_column() -> Value {
    text(
        "Age",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    )
}

fn columns(def: &ResourceDef) -> Vec<Value> {
    if def.custom {
        return custom_columns(def);
    }
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "nodes") => node_columns(),
        ("", "pods") => pod_columns(),
        ("", "namespaces") => vec![
            name_column(),
            text("Status", 0, "The status of the namespace"),
            age_column(),
        ],
        ("coordination.k8s.io", "leases") => vec![
            name_column(),
            text("Holder", 0, "The holder of the lease."),
            age_column(),
        ],
        ("policy", "poddisruptionbudgets") => budget_columns(),
        ("apps", "replicasets") => vec![
            name_column(),
            integer("Desired", "Number of desired pods."),
            integer("Current", "Number of actual pods."),
            integer("Ready", "Number of ready pods."),
            age_column(),
        ],
        ("apps", "daemonsets") => daemonset_columns(),
        (_, "events") => event_columns(),
        _ => vec![
            name_column(),
            col(
                "Created At",
                "date",
                "",
                0,
                "CreationTimestamp is a timestamp representing the server time when this object was created.",
            ),
        ],
    }
}

/// A custom resource's `additionalPrinterColumns` (an Age column when it has none).
fn custom_columns(def: &ResourceDef) -> Vec<Value> {
    let mut c = vec![name_column()];
    if def.printer_columns.is_empty() {
        c.push(col(
            "Age",
            "date",
            "",
            0,
            "Custom resource definition column (in JSONPath format): .metadata.creationTimestamp",
        ));
    }
    for pc in &def.printer_columns {
        c.push(col(
            pc.get("name").and_then(|x| x.as_str()).unwrap_or(""),
            pc.get("type").and_then(|x| x.as_str()).unwrap_or("string"),
            pc.get("format").and_then(|x| x.as_str()).unwrap_or(""),
            pc.get("priority").and_then(|x| x.as_i64()).unwrap_or(0),
            pc.get("description").and_then(|x| x.as_str()).unwrap_or(""),
        ));
    }
    c
}

fn node_columns() -> Vec<Value> {
    vec![
        name_column(),
        text("Status", 0, "The status of the node"),
        text("Roles", 0, "The roles of the node"),
        age_column(),
        text("Version", 0, "Kubelet Version reported by the node."),
        text("Internal-IP", 1, "List of internal IPs."),
        text("External-IP", 1, "List of external IPs."),
        text(
            "OS-Image",
            1,
            "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
        ),
        text(
            "Kernel-Version",
            1,
            "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
        ),
        text(
            "Container-Runtime",
            1,
            "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
        ),
    ]
}

fn pod_columns() -> Vec<Value> {
    vec![
        name_column(),
        text(
            "Ready",
            0,
            "The aggregate readiness state of this pod for accepting traffic.",
        ),
        text(
            "Status",
            0,
            "The aggregate status of the containers in this pod.",
        ),
        text(
            "Restarts",
            0,
            "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
        ),
        age_column(),
        text("IP", 1, "IP address allocated to the pod."),
        text("Node", 1, "Name of the node the pod is assigned to."),
        text(
            "Nominated Node",
            1,
            "Name of the node the pod is nominated to.",
        ),
        text("Readiness Gates", 1, "Readiness gates of the pod."),
    ]
}

fn budget_columns() -> Vec<Value> {
    vec![
        name_column(),
        text(
            "Min Available",
            0,
            "The minimum number of pods that must be available.",
        ),
        text(
            "Max Unavailable",
            0,
            "The maximum number of pods that may be unavailable.",
        ),
        integer(
            "Allowed Disruptions",
            "Calculated number of pods that may be disrupted at this time.",
        ),
        age_column(),
    ]
}

fn daemonset_columns() -> Vec<Value> {
    vec![
        name_column(),
        integer("Desired", "The desired number of pods."),
        integer("Current", "The current number of pods."),
        integer("Ready", "The number of pods ready."),
        integer("Up-to-date", "The number of pods updated."),
        integer("Available", "The number of pods available."),
        text("Node Selector", 0, "The node selector of the daemonset."),
        age_column(),
    ]
}

fn event_columns() -> Vec<Value> {
    vec![
        text("Last Seen", 0, "Time when last this event was seen."),
        text("Type", 0, "Type of this event."),
        text("Reason", 0, "Reason why this event was generated."),
        text("Object", 0, "The object this event is about."),
        text(
            "Message",
            0,
            "A human-readable description of the status of this operation.",
        ),
        name_column(),
    ]
}

fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(|x| x.as_str()).unwrap_or("")
}

fn none_if_empty(x: &str) -> Value {
    if x.is_empty() {
        json!("<none>")
    } else {
        json!(x)
    }
}

/// Evaluates the JSONPath expressions printer columns use: `.a.b`, `.a[0].b`, and filters
/// such as `.status.conditions[?(@.type=="Ready")].reason` (the first element that matches).
pub fn json_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let mut rest = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    let mut cur = v;
    while !rest.is_empty() {
        if let Some(index) = rest.strip_prefix('[') {
            if let Some(filter) = index.strip_prefix("?(") {
                let end = filter.find(")]")?;
                let condition = &filter[..end];
                cur = cur
                    .as_array()?
                    .iter()
                    .find(|item| filter_matches(item, condition))?;
                rest = &filter[end + 2..];
            } else {
                let end = index.find(']')?;
                cur = cur.get(index[..end].trim().parse::<usize>().ok()?)?;
                rest = &index[end + 1..];
            }
        } else {
            let field = rest.strip_prefix('.').unwrap_or(rest);
            let end = field.find(['.', '[']).unwrap_or(field.len());
            if end > 0 {
                cur = cur.get(&field[..end])?;
            }
            rest = &field[end..];
        }
    }
    Some(cur)
}

/// A filter's condition, `@.path=="value"` (or with single quotes), on one array element.
fn filter_matches(item: &Value, condition: &str) -> bool {
    let Some((left, right)) = condition.split_once("==") else {
        return false;
    };
    let left = left.trim();
    let path = left.strip_prefix('@').unwrap_or(left);
    let right = right.trim();
    let expected = right
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .or_else(|| right.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')))
        .unwrap_or(right);
    json_path(item, path).is_some_and(|found| match found {
        Value::String(text) => text == expected,
        // Numbers and booleans as JSON writes them (`@.ready==true`).
        other => {
            let written = other.to_string();
            written == expected
        }
    })
}

fn node_cells(v: &Value) -> Vec<Value> {
    let ready = v
        .pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .and_then(|c| c.iter().find(|x| s(x, "/type") == "Ready"))
        .map(|c| {
            if s(c, "/status") == "True" {
                "Ready"
            } else {
                "NotReady"
            }
        })
        .unwrap_or("Unknown");
    let mut status = ready.to_string();
    if v.pointer("/spec/unschedulable").and_then(|u| u.as_bool()) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<String> = v
        .pointer("/metadata/labels")
        .and_then(|l| l.as_object())
        .map(|l| {
            l.iter()
                .filter_map(|(k, val)| {
                    if let Some(r) = k.strip_prefix("node-role.kubernetes.io/") {
                        (!r.is_empty()).then(|| r.to_string())
                    } else if k == "kubernetes.io/role" {
                        val.as_str().map(String::from)
                    } else {
                        None
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    let addr = |t: &str| {
        v.pointer("/status/addresses")
            .and_then(|a| a.as_array())
            .and_then(|a| a.iter().find(|x| s(x, "/type") == t))
            .map(|x| s(x, "/address").to_string())
            .unwrap_or_default()
    };
    vec![
        json!(s(v, "/metadata/name")),
        json!(status),
        json!(if roles.is_empty() {
            "<none>".to_string()
        } else {
            roles.join(",")
        }),
        age(v.pointer("/metadata/creationTimestamp")),
        json!(s(v, "/status/nodeInfo/kubeletVersion")),
        none_if_empty(&addr("InternalIP")),
        none_if_empty(&addr("ExternalIP")),
        json!(s(v, "/status/nodeInfo/osImage")),
        json!(s(v, "/status/nodeInfo/kernelVersion")),
        json!(s(v, "/status/nodeInfo/containerRuntimeVersion")),
    ]
}

fn pod_cells(v: &Value) -> Vec<Value> {
    let total = v
        .pointer("/spec/containers")
        .and_then(|c| c.as_array())
        .map_or(0, |c| c.len());
    let statuses = v
        .pointer("/status/containerStatuses")
        .and_then(|c| c.as_array())
        .cloned()
        .unwrap_or_default();
    let ready = statuses
        .iter()
        .filter(|c| c.get("ready").and_then(|r| r.as_bool()) == Some(true))
        .count();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|c| c.get("restartCount").and_then(|r| r.as_i64()))
        .sum();
    let mut reason = s(v, "/status/phase").to_string();
    if !s(v, "/status/reason").is_empty() {
        reason = s(v, "/status/reason").to_string();
    }
    for c in &statuses {
        let w = s(c, "/state/waiting/reason");
        let t = s(c, "/state/terminated/reason");
        if !w.is_empty() {
            reason = w.to_string();
        } else if !t.is_empty() {
            reason = t.to_string();
        }
    }
    if v.pointer("/metadata/deletionTimestamp")
        .is_some_and(|d| !d.is_null())
    {
        reason = if s(v, "/status/reason") == "NodeLost" {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    vec![
        json!(s(v, "/metadata/name")),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts.to_string()),
        age(v.pointer("/metadata/creationTimestamp")),
        none_if_empty(s(v, "/status/podIP")),
        none_if_empty(s(v, "/spec/nodeName")),
        none_if_empty(s(v, "/status/nominatedNodeName")),
        json!("<none>"),
    ]
}

fn int_or_none(v: Option<&Value>) -> Value {
    match v {
        Some(Value::Number(n)) => json!(n.to_string()),
        Some(Value::String(s)) => json!(s),
        _ => json!("N/A"),
    }
}

fn cells(def: &ResourceDef, v: &Value) -> Vec<Value> {
    if def.custom {
        return custom_cells(def, v);
    }
    let name = json!(s(v, "/metadata/name"));
    let created = v.pointer("/metadata/creationTimestamp");
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "nodes") => node_cells(v),
        ("", "pods") => pod_cells(v),
        ("", "namespaces") => vec![name, json!(s(v, "/status/phase")), age(created)],
        ("coordination.k8s.io", "leases") => vec![
            name,
            none_if_empty(s(v, "/spec/holderIdentity")),
            age(created),
        ],
        ("policy", "poddisruptionbudgets") => vec![
            name,
            int_or_none(v.pointer("/spec/minAvailable")),
            int_or_none(v.pointer("/spec/maxUnavailable")),
            integer_at(v, "/status/disruptionsAllowed"),
            age(created),
        ],
        ("apps", "replicasets") => vec![
            name,
            integer_at(v, "/spec/replicas"),
            integer_at(v, "/status/replicas"),
            integer_at(v, "/status/readyReplicas"),
            age(created),
        ],
        ("apps", "daemonsets") => daemonset_cells(v),
        (_, "events") => event_cells(def, v),
        _ => vec![name, json!(created.and_then(|c| c.as_str()).unwrap_or(""))],
    }
}

/// The integer at `pointer`, 0 when there is none.
fn integer_at(v: &Value, pointer: &str) -> Value {
    json!(v.pointer(pointer).and_then(|x| x.as_i64()).unwrap_or(0))
}

/// A custom resource's cells: what each printer column's JSONPath finds (dates as ages).
fn custom_cells(def: &ResourceDef, v: &Value) -> Vec<Value> {
    let mut out = vec![json!(s(v, "/metadata/name"))];
    if def.printer_columns.is_empty() {
        out.push(age(v.pointer("/metadata/creationTimestamp")));
    }
    for pc in &def.printer_columns {
        let path = pc.get("jsonPath").and_then(|x| x.as_str()).unwrap_or("");
        let ty = pc.get("type").and_then(|x| x.as_str()).unwrap_or("string");
        out.push(match json_path(v, path) {
            None | Some(Value::Null) => Value::Null,
            Some(x) if ty == "date" => age(Some(x)),
            Some(x) => x.clone(),
        });
    }
    out
}

fn daemonset_cells(v: &Value) -> Vec<Value> {
    let sel = v
        .pointer("/spec/template/spec/nodeSelector")
        .and_then(|x| x.as_object())
        .map(|m| {
            m.iter()
                .map(|(k, x)| format!("{k}={}", x.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    vec![
        json!(s(v, "/metadata/name")),
        integer_at(v, "/status/desiredNumberScheduled"),
        integer_at(v, "/status/currentNumberScheduled"),
        integer_at(v, "/status/numberReady"),
        integer_at(v, "/status/updatedNumberScheduled"),
        integer_at(v, "/status/numberAvailable"),
        none_if_empty(&sel),
        age(v.pointer("/metadata/creationTimestamp")),
    ]
}

/// An event's cells, from the fields of its API (core/v1 or events.k8s.io/v1).
fn event_cells(def: &ResourceDef, v: &Value) -> Vec<Value> {
    let created = v.pointer("/metadata/creationTimestamp");
    let (kind, oname, last) = if def.group.is_empty() {
        (
            s(v, "/involvedObject/kind"),
            s(v, "/involvedObject/name"),
            v.get("lastTimestamp")
                .filter(|x| !x.is_null())
                .or(v.get("eventTime"))
                .or(created),
        )
    } else {
        (
            s(v, "/regarding/kind"),
            s(v, "/regarding/name"),
            v.get("eventTime").filter(|x| !x.is_null()).or(created),
        )
    };
    let msg = if def.group.is_empty() {
        s(v, "/message")
    } else {
        s(v, "/note")
    };
    vec![
        age(last),
        json!(s(v, "/type")),
        json!(s(v, "/reason")),
        json!(format!("{}/{oname}", kind.to_lowercase())),
        json!(msg),
        json!(s(v, "/metadata/name")),
    ]
}

fn row_object(v: &Value, include: Include) -> Option<Value> {
    match include {
        Include::None => None,
        Include::Object => Some(v.clone()),
        Include::Metadata => Some(json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": v.get("metadata").cloned().unwrap_or(json!({})),
        })),
    }
}

/// A Table of stored objects.
pub fn table(
    def: &ResourceDef,
    items: &[Arc<StoredObject>],
    rv: u64,
    cont: Option<&str>,
    include: Include,
) -> Value {
    let values: Vec<Value> = items.iter().filter_map(|o| o.value().ok()).collect();
    table_values(def, &values, rv, cont, include)
}

/// A Table of objects.
pub fn table_values(
    def: &ResourceDef,
    values: &[Value],
    rv: u64,
    cont: Option<&str>,
    include: Include,
) -> Value {
    let rows: Vec<Value> = values
        .iter()
        .map(|v| {
            let mut r = json!({"cells": cells(def, v)});
            if let Some(o) = row_object(v, include) {
                r["object"] = o;
            }
            r
        })
        .collect();
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = cont {
        meta["continue"] = json!(c);
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": columns(def),
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths_with_indexes_and_filters() {
        let nm = json!({"status": {"phase": "Running", "conditions": [
            {"type": "Drained", "status": "False", "reason": "Draining"},
            {"type": "DrainBlocked", "status": "True", "reason": "BudgetExhausted"},
        ]}});
        assert_eq!(json_path(&nm, ".status.phase"), Some(&json!("Running")));
        assert_eq!(
            json_path(&nm, ".status.conditions[1].type"),
            Some(&json!("DrainBlocked"))
        );
        assert_eq!(
            json_path(
                &nm,
                r#".status.conditions[?(@.type=="DrainBlocked")].reason"#
            ),
            Some(&json!("BudgetExhausted"))
        );
        assert_eq!(
            json_path(&nm, ".status.conditions[?(@.type=='Drained')].status"),
            Some(&json!("False"))
        );
        assert_eq!(
            json_path(&nm, r#".status.conditions[?(@.type=="Queued")].reason"#),
            None
        );
        assert_eq!(json_path(&nm, ".status.missing"), None);
    }

    #[test]
    fn durations_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(3600 * 5 + 60), "5h1m");
        assert_eq!(human_duration(86400 * 3), "3d");
    }
}
