//! Discovery documents (`/api`, `/api/v1`, `/apis`, `/apis/<group>[/<version>]`, `/version`),
//! served in the unaggregated form, which kubectl and client-go fall back to when the response is
//! plain `application/json`.

use serde_json::{Value, json};

use crate::resources::{ALL_VERBS, Registry, ResourceDef};

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "emulationMajor": "1",
        "emulationMinor": "33",
        "gitVersion": "v1.33.0",
        "gitCommit": "60a317eadfcb839692a5ab835f4ec1ef3bc1e3e8",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T13:07:52Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/api`.
pub fn core_versions(addr: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}]
    })
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    let preferred = vs.first().cloned().unwrap_or(json!({}));
    json!({"name": name, "versions": vs, "preferredVersion": preferred})
}

/// `/apis`.
pub fn groups(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .iter()
        .map(|(g, vs)| group_doc(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`.
pub fn group(reg: &Registry, name: &str) -> Option<Value> {
    reg.groups().iter().find(|(g, _)| g == name).map(|(g, vs)| {
        let mut d = group_doc(g, vs);
        d["kind"] = json!("APIGroup");
        d["apiVersion"] = json!("v1");
        d
    })
}

fn resource_entry(d: &ResourceDef) -> Value {
    let mut e = json!({
        "name": d.plural,
        "singularName": d.singular,
        "namespaced": d.namespaced,
        "kind": d.kind,
        "verbs": ALL_VERBS,
    });
    if !d.short_names.is_empty() {
        e["shortNames"] = json!(d.short_names);
    }
    if !d.categories.is_empty() {
        e["categories"] = json!(d.categories);
    }
    e
}

/// `/api/v1` or `/apis/<group>/<version>`; None when nothing is served there.
pub fn resources(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs: Vec<_> = reg
        .all()
        .into_iter()
        .filter(|d| d.group == group && d.version == version)
        .collect();
    if defs.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for d in &defs {
        out.push(resource_entry(d));
        if d.status_subresource {
            out.push(json!({
                "name": format!("{}/status", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if d.group.is_empty() && d.plural == "pods" {
            out.push(json!({
                "name": "pods/eviction",
                "singularName": "",
                "namespaced": true,
                "group": "policy",
                "version": "v1",
                "kind": "Eviction",
                "verbs": ["create"],
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": out}),
    )
}
