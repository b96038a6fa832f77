//! RBAC enforcement for one bearer-token identity from ClusterRole rules, with the real 403
//! messages. Other identities are not restricted.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::errors::{ApiError, SimError};

#[derive(Debug, Clone)]
struct Rule {
    groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
    names: Vec<String>,
}

fn list(v: &Value, k: &str) -> Vec<String> {
    v.get(k)
        .and_then(|x| x.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The rules enforced for one user.
#[derive(Debug, Clone)]
pub struct Rbac {
    user: String,
    rules: Vec<Rule>,
    /// Every refusal so far (its message), so a test can tell that nothing was denied.
    denied: Arc<Mutex<Vec<String>>>,
}

impl Rbac {
    /// Collects the rules of every ClusterRole (and Role) document in a multi-document YAML.
    pub fn from_yaml(user: &str, yaml: &str) -> Result<Self, SimError> {
        let mut rules = Vec::new();
        for doc in serde_yaml::Deserializer::from_str(yaml) {
            let v = <Value as serde::Deserialize>::deserialize(doc)?;
            let kind = v.get("kind").and_then(|k| k.as_str()).unwrap_or_default();
            if kind != "ClusterRole" && kind != "Role" {
                continue;
            }
            for r in v
                .get("rules")
                .and_then(|r| r.as_array())
                .cloned()
                .unwrap_or_default()
            {
                rules.push(Rule {
                    groups: list(&r, "apiGroups"),
                    resources: list(&r, "resources"),
                    verbs: list(&r, "verbs"),
                    names: list(&r, "resourceNames"),
                });
            }
        }
        Ok(Rbac {
            user: user.to_string(),
            rules,
            denied: Arc::default(),
        })
    }

    /// Reads the rules from a YAML file (or every YAML file of a directory).
    pub fn from_path(user: &str, path: &Path) -> Result<Self, SimError> {
        let mut text = String::new();
        if path.is_dir() {
            let mut entries: Vec<_> = std::fs::read_dir(path)?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .collect();
            entries.sort();
            for p in entries {
                if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                    text.push_str(&std::fs::read_to_string(&p)?);
                    text.push_str("\n---\n");
                }
            }
        } else {
            text = std::fs::read_to_string(path)?;
        }
        Self::from_yaml(user, &text)
    }

    /// The enforced user.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The refusals so far, oldest first.
    pub fn denials(&self) -> Vec<String> {
        self.denied.lock().map(|d| d.clone()).unwrap_or_default()
    }

    /// Authorizes a request; a 403 with the real message when denied (and remembered).
    // The request's coordinates, each a plain string: a struct would only rename them.
    #[allow(clippy::too_many_arguments)]
    pub fn check(
        &self,
        user: &str,
        verb: &str,
        group: &str,
        resource: &str,
        sub: &str,
        ns: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        if user != self.user {
            return Ok(());
        }
        let full = if sub.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}/{sub}")
        };
        let allowed = self.rules.iter().any(|r| {
            let g = r.groups.iter().any(|x| x == "*" || x == group);
            let res = r.resources.iter().any(|x| {
                x == "*"
                    || *x == full
                    || (sub.is_empty() && x == resource)
                    || (!sub.is_empty() && *x == format!("*/{sub}"))
            });
            let v = r.verbs.iter().any(|x| x == "*" || x == verb);
            let n = r.names.is_empty() || (!name.is_empty() && r.names.iter().any(|x| x == name));
            g && res && v && n
        });
        if allowed {
            return Ok(());
        }
        let scope = if ns.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace \"{ns}\"")
        };
        let why = format!(
            "User \"{user}\" cannot {verb} resource \"{full}\" in API group \"{group}\" {scope}"
        );
        if let Ok(mut denied) = self.denied.lock() {
            denied.push(why.clone());
        }
        Err(ApiError::forbidden(group, resource, name, &why))
    }
}
