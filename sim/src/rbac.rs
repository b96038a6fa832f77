//! RBAC enforcement for one bearer-token identity from ClusterRole and Role rules, with the real
//! 403 messages. Other identities are not restricted.
//!
//! Scopes as a real API server has them: a Role's rules hold only in its namespace; with bindings
//! in the YAML, only the roles bound to the user count (a RoleBinding's only in its namespace).
//! Without any binding, every role in the YAML is the user's (the simulator's own tests give
//! bare rules).

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
    /// Where the rule holds: `None` cluster wide, else in that namespace only.
    namespace: Option<String>,
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

fn str_at(v: &Value, path: &[&str]) -> String {
    path.iter()
        .try_fold(v, |v, key| v.get(key))
        .and_then(|x| x.as_str())
        .unwrap_or_default()
        .to_string()
}

/// Which RBAC object: kind, namespace (Roles and RoleBindings only; without one they are in
/// `default`, as kubectl would put them) and name.
#[derive(Debug, PartialEq)]
struct ObjectRef {
    kind: String,
    namespace: Option<String>,
    name: String,
}

impl ObjectRef {
    fn of(v: &Value) -> Self {
        let kind = str_at(v, &["kind"]);
        let namespace = matches!(kind.as_str(), "Role" | "RoleBinding").then(|| {
            Some(str_at(v, &["metadata", "namespace"]))
                .filter(|ns| !ns.is_empty())
                .unwrap_or_else(|| "default".to_string())
        });
        ObjectRef {
            kind,
            namespace,
            name: str_at(v, &["metadata", "name"]),
        }
    }
}

/// A role whose rules the user holds, and where: `None` cluster wide, else in that namespace.
struct Grant {
    role: ObjectRef,
    scope: Option<String>,
}

/// The grant a binding makes: a ClusterRoleBinding's cluster wide, a RoleBinding's in its
/// namespace (its roleRef a Role of that namespace or a ClusterRole).
fn grant_of(binding: &Value) -> Grant {
    let binding_ref = ObjectRef::of(binding);
    let kind = str_at(binding, &["roleRef", "kind"]);
    let namespace = if kind == "Role" {
        binding_ref.namespace.clone()
    } else {
        None
    };
    let scope = if binding_ref.kind == "RoleBinding" {
        binding_ref.namespace
    } else {
        None
    };
    Grant {
        role: ObjectRef {
            kind,
            namespace,
            name: str_at(binding, &["roleRef", "name"]),
        },
        scope,
    }
}

/// Whether a binding names `user`: as a User, or as a ServiceAccount (whose user name is
/// `system:serviceaccount:<namespace>:<name>`; a RoleBinding's subject defaults to its namespace).
fn binds(binding: &Value, user: &str) -> bool {
    let binding_ns = ObjectRef::of(binding).namespace;
    let subjects = binding.get("subjects").and_then(|s| s.as_array());
    subjects.into_iter().flatten().any(|subject| {
        let name = str_at(subject, &["name"]);
        match str_at(subject, &["kind"]).as_str() {
            "User" => name == user,
            "ServiceAccount" => {
                let ns = Some(str_at(subject, &["namespace"]))
                    .filter(|ns| !ns.is_empty())
                    .or_else(|| binding_ns.clone())
                    .unwrap_or_default();
                format!("system:serviceaccount:{ns}:{name}") == user
            }
            _ => false,
        }
    })
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
    /// Collects the rules granted to `user` by the ClusterRoles, Roles and bindings of a
    /// multi-document YAML.
    pub fn from_yaml(user: &str, yaml: &str) -> Result<Self, SimError> {
        let mut roles = Vec::new();
        let mut bindings = Vec::new();
        for doc in serde_yaml::Deserializer::from_str(yaml) {
            let v = <Value as serde::Deserialize>::deserialize(doc)?;
            match v.get("kind").and_then(|k| k.as_str()).unwrap_or_default() {
                "ClusterRole" | "Role" => roles.push(v),
                "ClusterRoleBinding" | "RoleBinding" => bindings.push(v),
                _ => {}
            }
        }
        let grants: Vec<Grant> = if bindings.is_empty() {
            roles
                .iter()
                .map(|role| {
                    let role = ObjectRef::of(role);
                    let scope = role.namespace.clone();
                    Grant { role, scope }
                })
                .collect()
        } else {
            bindings
                .iter()
                .filter(|b| binds(b, user))
                .map(grant_of)
                .collect()
        };
        let mut rules = Vec::new();
        for grant in grants {
            let Some(role) = roles.iter().find(|r| ObjectRef::of(r) == grant.role) else {
                continue;
            };
            for r in role
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
                    namespace: grant.scope.clone(),
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
            let scope = r.namespace.as_deref().is_none_or(|only| only == ns);
            g && res && v && n && scope
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
