//! Structural-schema handling for custom resources: defaulting, pruning of unknown fields,
//! required fields, types, enums, string patterns, and the one CEL rule operators commonly use for
//! immutability (`self == oldSelf`). Other CEL rules are not evaluated.

use serde_json::{Map, Value};

/// One validation failure: (reason, field path, message).
pub type Cause = (String, String, String);

fn ty_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_ok(want: &str, v: &Value) -> bool {
    match want {
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => true,
    }
}

/// Applies defaults and prunes unknown fields in place (the root's apiVersion, kind and
/// metadata are kept as they are).
pub fn default_and_prune(obj: &mut Value, schema: &Value) {
    if let Value::Object(m) = obj {
        let props = schema.get("properties").and_then(|p| p.as_object());
        let preserve = schema
            .get("x-kubernetes-preserve-unknown-fields")
            .and_then(|x| x.as_bool())
            == Some(true);
        if let Some(props) = props {
            for (k, s) in props {
                if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if !m.contains_key(k)
                    && let Some(d) = s.get("default")
                {
                    m.insert(k.clone(), d.clone());
                }
            }
        }
        if !preserve {
            m.retain(|k, _| {
                matches!(k.as_str(), "apiVersion" | "kind" | "metadata")
                    || props.is_some_and(|p| p.contains_key(k))
            });
        }
        for (k, v) in m.iter_mut() {
            if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(s) = props.and_then(|p| p.get(k)) {
                walk(v, s);
            }
        }
    }
}

fn walk(v: &mut Value, schema: &Value) {
    match v {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(|p| p.as_object());
            let addl = schema.get("additionalProperties");
            let preserve = schema
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(|x| x.as_bool())
                == Some(true);
            if let Some(props) = props {
                for (k, s) in props {
                    if !m.contains_key(k)
                        && let Some(d) = s.get("default")
                    {
                        m.insert(k.clone(), d.clone());
                    }
                }
            }
            if let Some(props) = props {
                if !preserve && addl.is_none() {
                    m.retain(|k, _| props.contains_key(k));
                }
                for (k, val) in m.iter_mut() {
                    if let Some(s) = props.get(k) {
                        walk(val, s);
                    } else if let Some(a) = addl.filter(|a| a.is_object()) {
                        walk(val, a);
                    }
                }
            } else if let Some(a) = addl.filter(|a| a.is_object()) {
                for val in m.values_mut() {
                    walk(val, a);
                }
            } else if !preserve && schema.get("type").and_then(|t| t.as_str()) == Some("object") {
                // An object without properties and without preserve-unknown-fields is pruned empty.
                *m = Map::new();
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for it in items {
                    walk(it, s);
                }
            }
        }
        _ => {}
    }
}

/// Validates types, required fields, enums, string patterns and `self == oldSelf` rules. As the
/// API server does, the rules (`x-kubernetes-validations`) are not checked on an object with a
/// blocking schema error (a type, a required field, an enum, a length): a cause says so instead.
pub fn validate(obj: &Value, old: Option<&Value>, schema: &Value) -> Vec<Cause> {
    let mut found = Found::default();
    if let (Value::Object(m), Some(props)) =
        (obj, schema.get("properties").and_then(|p| p.as_object()))
    {
        for (k, s) in props {
            if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(v) = m.get(k) {
                check(v, old.and_then(|o| o.get(k)), s, k, &mut found);
            }
        }
        required(m, schema, "", &mut found.schema);
    }
    let mut out = found.schema;
    if !has_rules(schema) {
        return out;
    }
    if out
        .iter()
        .any(|(reason, ..)| BLOCKING.contains(&reason.as_str()))
    {
        out.push((
            "FieldValueInvalid".into(),
            "<nil>".into(),
            "Invalid value: null: some validation rules were not checked because the object was \
             invalid; correct the existing errors to complete validation"
                .into(),
        ));
    } else {
        out.extend(found.rules);
    }
    out
}

/// Schema errors after which the API server checks no rule (apiextensions' `hasBlockingErr`).
const BLOCKING: [&str; 5] = [
    "FieldValueNotSupported",
    "FieldValueRequired",
    "FieldValueTooLong",
    "FieldValueTooMany",
    "FieldValueTypeInvalid",
];

/// What validation found: schema errors, and failed rules.
#[derive(Default)]
struct Found {
    schema: Vec<Cause>,
    rules: Vec<Cause>,
}

/// The schema has a rule (`x-kubernetes-validations`) anywhere.
fn has_rules(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => m.contains_key("x-kubernetes-validations") || m.values().any(has_rules),
        Value::Array(items) => items.iter().any(has_rules),
        _ => false,
    }
}

fn required(m: &Map<String, Value>, schema: &Value, path: &str, out: &mut Vec<Cause>) {
    if let Some(req) = schema.get("required").and_then(|r| r.as_array()) {
        for r in req.iter().filter_map(|r| r.as_str()) {
            if !m.contains_key(r) {
                let field = if path.is_empty() {
                    r.to_string()
                } else {
                    format!("{path}.{r}")
                };
                out.push(("FieldValueRequired".into(), field, "Required value".into()));
            }
        }
    }
}

fn check(v: &Value, old: Option<&Value>, schema: &Value, path: &str, found: &mut Found) {
    if v.is_null() && schema.get("nullable").and_then(|n| n.as_bool()) == Some(true) {
        return;
    }
    if let Some(t) = schema.get("type").and_then(|t| t.as_str())
        && !type_ok(t, v)
    {
        found.schema.push((
            "FieldValueTypeInvalid".into(),
            path.to_string(),
            format!(
                "Invalid value: \"{}\": {path} in body must be of type {t}: \"{}\"",
                ty_name(v),
                ty_name(v)
            ),
        ));
        return;
    }
    check_enum(v, schema, path, &mut found.schema);
    check_pattern(v, schema, path, &mut found.schema);
    if let Some(old) = old {
        check_transition_rules(v, old, schema, path, &mut found.rules);
    }
    match v {
        Value::Object(m) => {
            if let Some(props) = schema.get("properties").and_then(|p| p.as_object()) {
                for (k, s) in props {
                    if let Some(cv) = m.get(k) {
                        check(
                            cv,
                            old.and_then(|o| o.get(k)),
                            s,
                            &format!("{path}.{k}"),
                            found,
                        );
                    }
                }
            }
            required(m, schema, path, &mut found.schema);
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, it) in items.iter().enumerate() {
                    check(it, None, s, &format!("{path}[{i}]"), found);
                }
            }
        }
        _ => {}
    }
}

/// `enum`: the value is one of those listed.
fn check_enum(v: &Value, schema: &Value, path: &str, out: &mut Vec<Cause>) {
    if let Some(e) = schema.get("enum").and_then(|e| e.as_array())
        && !e.contains(v)
    {
        let allowed: Vec<String> = e.iter().map(|x| x.to_string()).collect();
        out.push((
            "FieldValueNotSupported".into(),
            path.to_string(),
            format!(
                "Unsupported value: {v}: supported values: {}",
                allowed.join(", ")
            ),
        ));
    }
}

/// `pattern`: a string matches the regular expression.
fn check_pattern(v: &Value, schema: &Value, path: &str, out: &mut Vec<Cause>) {
    if let (Some(pattern), Some(text)) =
        (schema.get("pattern").and_then(|p| p.as_str()), v.as_str())
        && let Ok(re) = regex::Regex::new(pattern)
        && !re.is_match(text)
    {
        // A pattern the regex crate cannot compile is not checked rather than guessed.
        out.push((
            "FieldValueInvalid".into(),
            path.to_string(),
            format!("Invalid value: \"{text}\": {path} in body should match '{pattern}'"),
        ));
    }
}

/// The transition rules of `x-kubernetes-validations` an update can break: `self == oldSelf`.
fn check_transition_rules(
    v: &Value,
    old: &Value,
    schema: &Value,
    path: &str,
    out: &mut Vec<Cause>,
) {
    let Some(rules) = schema
        .get("x-kubernetes-validations")
        .and_then(|r| r.as_array())
    else {
        return;
    };
    for r in rules {
        let rule = r.get("rule").and_then(|x| x.as_str()).unwrap_or_default();
        if rule.replace(' ', "") == "self==oldSelf" && v != old {
            let msg = r
                .get("message")
                .and_then(|x| x.as_str())
                .unwrap_or("failed rule: self == oldSelf");
            out.push((
                "FieldValueInvalid".into(),
                path.to_string(),
                format!("Invalid value: \"{}\": {msg}", ty_name(v)),
            ));
        }
    }
}

/// The fields pruning would drop from `obj` (dotted paths), for `fieldValidation=Strict`.
pub fn unknown_fields(obj: &Value, schema: &Value) -> Vec<String> {
    let mut pruned = obj.clone();
    default_and_prune(&mut pruned, schema);
    let mut out = Vec::new();
    removed(obj, &pruned, "", &mut out);
    out
}

fn removed(before: &Value, after: &Value, prefix: &str, out: &mut Vec<String>) {
    let path = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for (k, bv) in b {
                match a.get(k) {
                    None => out.push(path(k)),
                    Some(av) => removed(bv, av, &path(k), out),
                }
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            for (i, (bv, av)) in b.iter().zip(a.iter()).enumerate() {
                removed(bv, av, &format!("{prefix}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prunes_defaults_and_requires() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["nodeName"], "properties": {
                "nodeName": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]},
                "reason": {"type": "string", "default": "none"}}}}});
        let mut obj = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"}, "spec": {"bogus": 1}, "junk": 2});
        default_and_prune(&mut obj, &schema);
        assert_eq!(
            obj,
            json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"}, "spec": {"reason": "none"}})
        );
        let errs = validate(&obj, None, &schema);
        assert_eq!(errs[0].1, "spec.nodeName");
        let new = json!({"spec": {"nodeName": "b"}});
        let old = json!({"spec": {"nodeName": "a"}});
        assert_eq!(validate(&new, Some(&old), &schema).len(), 1);
    }

    #[test]
    fn strings_must_match_their_pattern() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "timeout": {"type": "string", "nullable": true, "pattern": "^[0-9]+m$"}}}}});
        assert!(validate(&json!({"spec": {"timeout": "30m"}}), None, &schema).is_empty());
        assert!(validate(&json!({"spec": {"timeout": null}}), None, &schema).is_empty());
        let errs = validate(&json!({"spec": {"timeout": "soon"}}), None, &schema);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].1, "spec.timeout");
        assert!(
            errs[0].2.contains("should match '^[0-9]+m$'"),
            "{}",
            errs[0].2
        );
    }

    /// A blocking schema error (here a required field) stops the rules, and a cause says so; a
    /// pattern error does not block them.
    #[test]
    fn rules_are_not_checked_on_an_object_with_a_blocking_error() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["nodeName"], "properties": {
                "nodeName": {"type": "string", "pattern": "^[a-z]+$",
                    "x-kubernetes-validations": [{"rule": "self == oldSelf"}]},
                "reason": {"type": "string"}}}}});
        let old = json!({"spec": {"nodeName": "a"}});
        let blocked = validate(&json!({"spec": {"reason": "r"}}), Some(&old), &schema);
        let fields: Vec<&str> = blocked.iter().map(|(_, f, _)| f.as_str()).collect();
        assert_eq!(fields, ["spec.nodeName", "<nil>"], "{blocked:?}");
        assert!(
            blocked[1]
                .2
                .contains("some validation rules were not checked")
        );
        let not_blocked = validate(&json!({"spec": {"nodeName": "B"}}), Some(&old), &schema);
        let reasons: Vec<&str> = not_blocked.iter().map(|(_, _, m)| m.as_str()).collect();
        assert_eq!(
            not_blocked.len(),
            2,
            "a pattern error and the rule: {reasons:?}"
        );
    }
}
