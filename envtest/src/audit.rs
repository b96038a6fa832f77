//! The API server's audit log, to count the requests of chosen users (a benchmark's operator,
//! a test's ServiceAccount) on a real API server, as the simulator's request accounting does.
//!
//! ```ignore
//! let audit = AuditLog::for_users(&dir, &["system:serviceaccount:nmo-system:nmo"])?;
//! let options = Options { extra_args: audit.apiserver_args(), ..Options::default() };
//! let cluster = ControlPlane::start(options)?;
//! // ... the operator works ...
//! let requests = audit.requests()?; // one per request: user, verb, resource, code
//! ```
//!
//! The policy logs only the chosen users, at `Metadata` level (no bodies), at the stages
//! `ResponseStarted` (a watch, counted when it opens) and `ResponseComplete`; [`AuditLog::requests`]
//! folds both stages of one request (its `auditID`) into one [`Request`]. The log is written
//! synchronously (`--audit-log-mode=blocking`), so a request is in the file once answered.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::component::Component;
use crate::error::{Error, Result};

/// One audited request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The user name (`system:serviceaccount:<ns>:<name>`, a certificate's CN).
    pub user: String,
    /// The User-Agent header.
    pub user_agent: String,
    /// The verb: get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: String,
    /// The API group ("" for core).
    pub group: String,
    /// The resource (`pods`), "" for a non-resource URL.
    pub resource: String,
    /// The subresource (`eviction`, `status`), "" when none.
    pub subresource: String,
    /// The namespace, "" when cluster scoped.
    pub namespace: String,
    /// The HTTP code answered (a watch: the code it opened with), 0 when none was recorded.
    pub code: u16,
    /// The request URI.
    pub uri: String,
}

impl Request {
    /// `resource/subresource`, or `resource`.
    pub fn resource_path(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// An audit policy and log file for an API server.
#[derive(Clone, Debug)]
pub struct AuditLog {
    policy: PathBuf,
    log: PathBuf,
}

impl AuditLog {
    /// Writes, in `dir`, a policy that logs every request of `users` (and nothing else) and
    /// names the log file there. `dir` must outlive the control plane's writes (a
    /// [`crate::ControlPlane`]'s own directory is removed when it stops).
    pub fn for_users(dir: &Path, users: &[&str]) -> Result<AuditLog> {
        let policy = dir.join("audit-policy.yaml");
        let log = dir.join("audit.log");
        let document = json!({
            "apiVersion": "audit.k8s.io/v1",
            "kind": "Policy",
            "omitStages": ["RequestReceived"],
            "rules": [
                {"level": "Metadata", "users": users},
                {"level": "None"},
            ],
        });
        let text = serde_yaml::to_string(&document).map_err(|source| Error::Yaml {
            context: "writing the audit policy".into(),
            source,
        })?;
        std::fs::write(&policy, text)
            .map_err(|source| Error::io(format!("writing {}", policy.display()), source))?;
        Ok(AuditLog { policy, log })
    }

    /// The API server flags that enable this log (for [`crate::Options::extra_args`]).
    pub fn apiserver_args(&self) -> Vec<(Component, String)> {
        [
            format!("--audit-policy-file={}", self.policy.display()),
            format!("--audit-log-path={}", self.log.display()),
            "--audit-log-format=json".to_string(),
            "--audit-log-mode=blocking".to_string(),
            // One file, never rotated away under a reader.
            "--audit-log-maxsize=0".to_string(),
        ]
        .into_iter()
        .map(|arg| (Component::ApiServer, arg))
        .collect()
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.log
    }

    /// The log's length in bytes now: [`AuditLog::requests_since`] reads only what follows.
    pub fn mark(&self) -> u64 {
        std::fs::metadata(&self.log).map(|m| m.len()).unwrap_or(0)
    }

    /// Every request logged so far, in the order they started.
    pub fn requests(&self) -> Result<Vec<Request>> {
        self.requests_since(0)
    }

    /// The requests logged after `mark` (a [`AuditLog::mark`]).
    pub fn requests_since(&self, mark: u64) -> Result<Vec<Request>> {
        let text = match std::fs::read(&self.log) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => {
                return Err(Error::io(format!("reading {}", self.log.display()), source));
            }
        };
        let start = usize::try_from(mark).unwrap_or(usize::MAX).min(text.len());
        Ok(parse(&String::from_utf8_lossy(&text[start..])))
    }
}

/// The requests of audit log lines (JSON events), each request once.
pub fn parse(text: &str) -> Vec<Request> {
    let mut order: Vec<String> = Vec::new();
    let mut by_id: BTreeMap<String, Request> = BTreeMap::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            // A line cut short by a write in progress: the next read has it.
            continue;
        };
        let id = event["auditID"].as_str().unwrap_or_default().to_string();
        let text = |pointer: &str| {
            event
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let code = event
            .pointer("/responseStatus/code")
            .and_then(Value::as_u64)
            .and_then(|code| u16::try_from(code).ok())
            .unwrap_or(0);
        let request = Request {
            user: text("/user/username"),
            user_agent: text("/userAgent"),
            verb: text("/verb"),
            group: text("/objectRef/apiGroup"),
            resource: text("/objectRef/resource"),
            subresource: text("/objectRef/subresource"),
            namespace: text("/objectRef/namespace"),
            code,
            uri: text("/requestURI"),
        };
        match by_id.get_mut(&id) {
            // A later stage of a request already seen: it may carry the final code.
            Some(seen) => {
                if seen.code == 0 {
                    seen.code = request.code;
                }
            }
            // The end of a watch opened before these lines (its ResponseStarted is not among
            // them): not a request made since.
            None if request.verb == "watch"
                && request.code == 200
                && event["stage"].as_str() == Some("ResponseComplete") => {}
            None => {
                order.push(id.clone());
                by_id.insert(id, request);
            }
        }
    }
    order
        .into_iter()
        .filter_map(|id| by_id.remove(&id))
        .collect()
}

/// How many of `requests` fall under each key `key` gives (e.g. `verb resource`).
pub fn count_by<K: Ord>(requests: &[Request], key: impl Fn(&Request) -> K) -> BTreeMap<K, u64> {
    let mut counts = BTreeMap::new();
    for request in requests {
        *counts.entry(key(request)).or_insert(0) += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINES: &str = r#"{"kind":"Event","auditID":"a1","stage":"ResponseComplete","requestURI":"/api/v1/pods/x","verb":"get","user":{"username":"nmo"},"userAgent":"nmo/1","objectRef":{"resource":"pods","namespace":"w","name":"x","apiVersion":"v1"},"responseStatus":{"code":404}}
{"kind":"Event","auditID":"a2","stage":"ResponseStarted","requestURI":"/api/v1/pods?watch=1","verb":"watch","user":{"username":"nmo"},"objectRef":{"resource":"pods","apiVersion":"v1"},"responseStatus":{"code":200}}
{"kind":"Event","auditID":"a3","stage":"ResponseComplete","verb":"create","user":{"username":"nmo"},"objectRef":{"resource":"pods","subresource":"eviction","namespace":"w","apiVersion":"v1"},"responseStatus":{"code":429}}
{"kind":"Event","auditID":"a2","stage":"ResponseComplete","verb":"watch","user":{"username":"nmo"},"objectRef":{"resource":"pods","apiVersion":"v1"},"responseStatus":{"code":200}}
{"kind":"Event","auditID":"a4","stage":"ResponseCo"#;

    #[test]
    fn each_request_counts_once_whatever_its_stages() {
        let requests = parse(LINES);
        assert_eq!(requests.len(), 3, "{requests:?}");
        assert_eq!(requests[0].code, 404);
        assert_eq!(requests[1].verb, "watch");
        assert_eq!(requests[2].resource_path(), "pods/eviction");
        assert_eq!(requests[2].code, 429);
        let by_verb = count_by(&requests, |r| r.verb.clone());
        assert_eq!(by_verb["get"], 1);
        assert_eq!(by_verb["watch"], 1);
    }

    #[test]
    fn a_watch_that_only_ends_in_these_lines_was_made_before_them() {
        // a5 opened before the mark (its ResponseStarted is not here) and ends after it.
        let lines = r#"{"kind":"Event","auditID":"a5","stage":"ResponseComplete","verb":"watch","user":{"username":"nmo"},"objectRef":{"resource":"nodes","apiVersion":"v1"},"responseStatus":{"code":200}}
{"kind":"Event","auditID":"a6","stage":"ResponseComplete","verb":"patch","user":{"username":"nmo"},"objectRef":{"resource":"nodes","apiVersion":"v1"},"responseStatus":{"code":200}}"#;
        let requests = parse(lines);
        assert_eq!(requests.len(), 1, "{requests:?}");
        assert_eq!(requests[0].verb, "patch");
    }

    #[test]
    fn the_policy_logs_only_the_chosen_users() {
        let dir = std::env::temp_dir().join(format!("nmo-envtest-audit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let audit = AuditLog::for_users(&dir, &["nmo"]).unwrap();
        let policy: Value =
            serde_yaml::from_str(&std::fs::read_to_string(dir.join("audit-policy.yaml")).unwrap())
                .unwrap();
        assert_eq!(policy["rules"][0]["users"], json!(["nmo"]));
        assert_eq!(policy["rules"][1]["level"], "None");
        assert!(
            audit
                .apiserver_args()
                .iter()
                .any(|(c, a)| *c == Component::ApiServer && a.starts_with("--audit-log-path="))
        );
        assert!(audit.requests().unwrap().is_empty(), "no log yet: nothing");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
