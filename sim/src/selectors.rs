//! Label and field selectors: parsing the query-string forms and matching stored objects.

use serde_json::Value;

use crate::errors::ApiError;
use crate::object::StoredObject;
use crate::resources::ResourceDef;

/// One label requirement.
#[derive(Debug, Clone, PartialEq)]
pub enum LabelReq {
    /// `key` (exists).
    Exists(String),
    /// `!key`.
    NotExists(String),
    /// `key in (..)`, also `key=v`, `key==v`.
    In(String, Vec<String>),
    /// `key notin (..)`, also `key!=v`.
    NotIn(String, Vec<String>),
    /// `key>n`.
    Gt(String, i64),
    /// `key<n`.
    Lt(String, i64),
}

impl LabelReq {
    fn matches(&self, labels: &[(String, String)]) -> bool {
        let get = |k: &str| {
            labels
                .iter()
                .find(|(lk, _)| lk == k)
                .map(|(_, v)| v.as_str())
        };
        match self {
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
            LabelReq::In(k, vs) => get(k).is_some_and(|v| vs.iter().any(|x| x == v)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|v| !vs.iter().any(|x| x == v)),
            LabelReq::Gt(k, n) => get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            LabelReq::Lt(k, n) => get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        }
    }
}

/// A parsed label selector (all requirements must match). Empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(pub Vec<LabelReq>);

impl LabelSelector {
    /// Matches a label set.
    pub fn matches(&self, labels: &[(String, String)]) -> bool {
        self.0.iter().all(|r| r.matches(labels))
    }

    /// True when there is no requirement.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Parses the `labelSelector` query parameter.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top_level(s) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            reqs.push(parse_label_req(part)?);
        }
        Ok(LabelSelector(reqs))
    }

    /// Converts a `metav1.LabelSelector` object (matchLabels/matchExpressions).
    pub fn from_object(sel: &Value) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if let Some(ml) = sel.get("matchLabels").and_then(|m| m.as_object()) {
            for (k, v) in ml {
                reqs.push(LabelReq::In(
                    k.clone(),
                    vec![v.as_str().unwrap_or_default().to_string()],
                ));
            }
        }
        if let Some(me) = sel.get("matchExpressions").and_then(|m| m.as_array()) {
            for e in me {
                let key = e
                    .get("key")
                    .and_then(|k| k.as_str())
                    .unwrap_or_default()
                    .to_string();
                let values: Vec<String> = e
                    .get("values")
                    .and_then(|v| v.as_array())
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                let op = e
                    .get("operator")
                    .and_then(|o| o.as_str())
                    .unwrap_or_default();
                reqs.push(match op {
                    "In" => LabelReq::In(key, values),
                    "NotIn" => LabelReq::NotIn(key, values),
                    "Exists" => LabelReq::Exists(key),
                    "DoesNotExist" => LabelReq::NotExists(key),
                    other => {
                        return Err(format!("{other:?} is not a valid label selector operator"));
                    }
                });
            }
        }
        Ok(LabelSelector(reqs))
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_err(part: &str, why: &str) -> ApiError {
    ApiError::bad_request(format!("unable to parse requirement: {why}: {part:?}"))
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn parse_set(part: &str, rest: &str) -> Result<Vec<String>, ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| parse_err(part, "expected a parenthesized set of values"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

fn parse_label_req(part: &str) -> Result<LabelReq, ApiError> {
    if let Some(k) = part.strip_prefix('!') {
        let k = k.trim();
        if !valid_key(k) {
            return Err(parse_err(part, "invalid label key"));
        }
        return Ok(LabelReq::NotExists(k.into()));
    }
    let words: Vec<&str> = part.split_whitespace().collect();
    if words.len() >= 2 && (words[1] == "in" || words[1] == "notin") {
        let key = words[0];
        if !valid_key(key) {
            return Err(parse_err(part, "invalid label key"));
        }
        let idx = part.find(words[1]).unwrap_or(0) + words[1].len();
        let values = parse_set(part, &part[idx..])?;
        return Ok(if words[1] == "in" {
            LabelReq::In(key.into(), values)
        } else {
            LabelReq::NotIn(key.into(), values)
        });
    }
    for (op, kind) in [("!=", 0), ("==", 1), ("=", 1), (">", 2), ("<", 3)] {
        if let Some(i) = part.find(op) {
            let key = part[..i].trim();
            let val = part[i + op.len()..].trim().to_string();
            if !valid_key(key) {
                return Err(parse_err(part, "invalid label key"));
            }
            return match kind {
                0 => Ok(LabelReq::NotIn(key.into(), vec![val])),
                1 => Ok(LabelReq::In(key.into(), vec![val])),
                _ => {
                    let n = val.parse::<i64>().map_err(|_| {
                        parse_err(
                            part,
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        )
                    })?;
                    Ok(if kind == 2 {
                        LabelReq::Gt(key.into(), n)
                    } else {
                        LabelReq::Lt(key.into(), n)
                    })
                }
            };
        }
    }
    let key = part.trim();
    if !valid_key(key) {
        return Err(parse_err(part, "invalid label key"));
    }
    Ok(LabelReq::Exists(key.into()))
}

/// What a field requirement looks at.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldTarget {
    /// `metadata.name`.
    Name,
    /// `metadata.namespace`.
    Namespace,
    /// One of the resource's extra fields (index into `ResourceDef::fields`).
    Field(usize),
}

/// One field requirement.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldReq {
    /// What it looks at.
    pub target: FieldTarget,
    /// The wanted value.
    pub value: String,
    /// `!=`.
    pub negate: bool,
}

/// A parsed field selector.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(pub Vec<FieldReq>);

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut esc = false;
    for c in s.chars() {
        if esc {
            out.push(c);
            esc = false;
        } else if c == '\\' {
            esc = true;
        } else {
            out.push(c);
        }
    }
    out
}

/// Splits on unescaped commas.
fn split_escaped(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut esc = false;
    for c in s.chars() {
        if esc {
            cur.push('\\');
            cur.push(c);
            esc = false;
        } else if c == '\\' {
            esc = true;
        } else if c == ',' {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out
}

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter for a resource; unknown fields are a 400 as in
    /// the real server.
    pub fn parse(s: &str, def: &ResourceDef) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in split_escaped(s) {
            if part.trim().is_empty() {
                continue;
            }
            let (field, value, negate) = if let Some(i) = part.find("!=") {
                (&part[..i], &part[i + 2..], true)
            } else if let Some(i) = part.find("==") {
                (&part[..i], &part[i + 2..], false)
            } else if let Some(i) = part.find('=') {
                (&part[..i], &part[i + 1..], false)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector: invalid selector: '{part}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            let target = match field {
                "metadata.name" => FieldTarget::Name,
                "metadata.namespace" if def.namespaced => FieldTarget::Namespace,
                f => match def.field_index(f) {
                    Some(i) => FieldTarget::Field(i),
                    None => {
                        return Err(ApiError::bad_request(format!(
                            "field label not supported: {f}"
                        )));
                    }
                },
            };
            reqs.push(FieldReq {
                target,
                value: unescape(value.trim()),
                negate,
            });
        }
        Ok(FieldSelector(reqs))
    }

    /// Matches a stored object.
    pub fn matches(&self, obj: &StoredObject) -> bool {
        self.0.iter().all(|r| {
            let actual = match &r.target {
                FieldTarget::Name => obj.name.as_str(),
                FieldTarget::Namespace => obj.namespace.as_str(),
                FieldTarget::Field(i) => obj.fields.get(*i).map(|s| s.as_str()).unwrap_or(""),
            };
            (actual == r.value) != r.negate
        })
    }

    /// The value of an equality requirement on a target, if any (used to pick an index).
    pub fn equality(&self, target: &FieldTarget) -> Option<&str> {
        self.0
            .iter()
            .find(|r| !r.negate && &r.target == target)
            .map(|r| r.value.as_str())
    }
}

/// A combined filter for lists and watches.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Namespace restriction (namespaced requests).
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
}

impl Filter {
    /// Matches a stored object.
    pub fn matches(&self, obj: &StoredObject) -> bool {
        if let Some(ns) = &self.namespace
            && &obj.namespace != ns
        {
            return false;
        }
        self.labels.matches(&obj.labels) && self.fields.matches(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn label_selector_operators() {
        let labels = l(&[("app", "web"), ("tier", "front")]);
        let ok = |s: &str| LabelSelector::parse(s).unwrap().matches(&labels);
        assert!(ok("app=web"));
        assert!(ok("app==web,tier"));
        assert!(!ok("app!=web"));
        assert!(ok("app in (web, db)"));
        assert!(!ok("app notin (web,db)"));
        assert!(ok("missing notin (x)"));
        assert!(ok("!missing"));
        assert!(!ok("!app"));
        assert!(ok("app in (web),tier in (front,back)"));
        assert!(LabelSelector::parse("a in b").is_err());
    }
}
