//! A minimal OpenAPI v3 discovery (`/openapi/v3` and one document per group/version): every
//! resource path with its operations, the `x-kubernetes-group-version-kind` extension and the
//! `fieldValidation` query parameter. That is what kubectl checks before it leaves validation to
//! the server (`kubectl apply`/`create` fail with "failed to download openapi" without it).
//! Component schemas are not served (`kubectl explain` does not work).

use serde_json::{Map, Value, json};

use crate::resources::{Registry, ResourceDef};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn hash(reg: &Registry) -> String {
    // Changes whenever the set of served resources changes (CRDs), so kubectl's cache refreshes.
    let mut h: u64 = 1469598103934665603;
    for d in reg.all() {
        for b in d.key().bytes().chain(d.version.bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(1099511628211);
        }
    }
    format!("{h:016X}{h:016X}")
}

/// `/openapi/v3`.
pub fn root(reg: &Registry) -> Value {
    let h = hash(reg);
    let mut paths = Map::new();
    paths.insert(
        "api".into(),
        json!({"serverRelativeURL": format!("/openapi/v3/api?hash={h}")}),
    );
    paths.insert(
        "apis".into(),
        json!({"serverRelativeURL": format!("/openapi/v3/apis?hash={h}")}),
    );
    for d in reg.all() {
        let p = gv_path(&d.group, &d.version);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={h}")}),
        );
    }
    json!({"paths": paths})
}

fn operation(d: &ResourceDef, verb: &str, action: &str) -> Value {
    let mut params = vec![
        json!({"name": "pretty", "in": "query", "schema": {"type": "string", "uniqueItems": true}}),
    ];
    if matches!(verb, "patch" | "put" | "post") {
        params.push(json!({"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}}));
        params.push(json!({"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}}));
        params.push(json!({
            "name": "fieldValidation", "in": "query",
            "description": "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields.",
            "schema": {"type": "string", "uniqueItems": true}
        }));
    }
    json!({
        "operationId": format!("{verb}{}", d.kind),
        "parameters": params,
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": d.group, "version": d.version, "kind": d.kind},
    })
}

/// `/openapi/v3/<gv>`; None when nothing is served there.
pub fn group_version(reg: &Registry, gv: &str) -> Option<Value> {
    let defs: Vec<_> = reg
        .all()
        .into_iter()
        .filter(|d| gv_path(&d.group, &d.version) == gv)
        .collect();
    if defs.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    for d in &defs {
        let base = format!("/{}", gv_path(&d.group, &d.version));
        let coll = if d.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", d.plural)
        } else {
            format!("{base}/{}", d.plural)
        };
        paths.insert(
            coll.clone(),
            json!({"get": operation(d, "list", "list"), "post": operation(d, "post", "post"),
                   "delete": operation(d, "delete", "deletecollection")}),
        );
        paths.insert(
            format!("{coll}/{{name}}"),
            json!({"get": operation(d, "read", "get"), "put": operation(d, "put", "put"),
                   "patch": operation(d, "patch", "patch"), "delete": operation(d, "delete", "delete")}),
        );
        if d.status_subresource {
            paths.insert(
                format!("{coll}/{{name}}/status"),
                json!({"get": operation(d, "read", "get"), "put": operation(d, "put", "put"),
                       "patch": operation(d, "patch", "patch")}),
            );
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": {}}
    }))
}
