//! Request accounting by verb, resource, subresource and client identity.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::Serialize;

/// What one request is counted under.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct RequestKey {
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection
    /// (discovery and other non-resource requests: the HTTP method, lower case).
    pub verb: String,
    /// API group ("" for core).
    pub group: String,
    /// Resource plural ("" for non-resource requests, whose path is in `subresource`).
    pub resource: String,
    /// Subresource ("status", "eviction"), or the path of a non-resource request.
    pub subresource: String,
    /// The user the bearer token maps to ("" when anonymous).
    pub user: String,
    /// The User-Agent header.
    pub user_agent: String,
}

/// A filter over counted requests; `None` fields match anything.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Verb.
    pub verb: Option<String>,
    /// Resource plural.
    pub resource: Option<String>,
    /// Subresource ("" for the main resource).
    pub subresource: Option<String>,
    /// User (bearer token identity).
    pub user: Option<String>,
    /// User-Agent substring.
    pub user_agent: Option<String>,
}

impl Query {
    /// Everything.
    pub fn all() -> Self {
        Self::default()
    }
    /// Filter by verb.
    #[must_use]
    pub fn verb(mut self, v: &str) -> Self {
        self.verb = Some(v.into());
        self
    }
    /// Filter by resource plural.
    #[must_use]
    pub fn resource(mut self, r: &str) -> Self {
        self.resource = Some(r.into());
        self
    }
    /// Filter by subresource ("" for the main resource).
    #[must_use]
    pub fn subresource(mut self, s: &str) -> Self {
        self.subresource = Some(s.into());
        self
    }
    /// Filter by user.
    #[must_use]
    pub fn user(mut self, u: &str) -> Self {
        self.user = Some(u.into());
        self
    }
    /// Filter by User-Agent substring.
    #[must_use]
    pub fn user_agent(mut self, ua: &str) -> Self {
        self.user_agent = Some(ua.into());
        self
    }

    fn matches(&self, k: &RequestKey) -> bool {
        self.verb.as_ref().is_none_or(|v| v == &k.verb)
            && self.resource.as_ref().is_none_or(|r| r == &k.resource)
            && self
                .subresource
                .as_ref()
                .is_none_or(|s| s == &k.subresource)
            && self.user.as_ref().is_none_or(|u| u == &k.user)
            && self
                .user_agent
                .as_ref()
                .is_none_or(|u| k.user_agent.contains(u.as_str()))
    }
}

/// The counters.
#[derive(Debug, Default)]
pub struct Accounting {
    counts: Mutex<HashMap<RequestKey, u64>>,
    /// Responses by request and status code: benchmarks count refused evictions (429) by who
    /// asked, which the request counts alone cannot tell.
    statuses: Mutex<HashMap<(RequestKey, u16), u64>>,
    /// The connections requests came on, with the user and User-Agent of the first request
    /// each carried: benchmarks report how many connections a client used.
    connections: Mutex<HashMap<u64, (String, String)>>,
    /// Eviction answers by pod (namespace, name) and status code: benchmarks tell the refusals
    /// of one kind of pod (a VM's launcher pod) from another's.
    evictions: Mutex<HashMap<(String, String, u16), u64>>,
}

impl Accounting {
    /// Counts the answer `code` to an eviction of pod `namespace/name`.
    pub fn record_eviction(&self, namespace: &str, name: &str, code: u16) {
        let mut e = self.evictions.lock().unwrap_or_else(|p| p.into_inner());
        *e.entry((namespace.to_string(), name.to_string(), code))
            .or_insert(0) += 1;
    }

    /// Every eviction answer so far: (namespace, name, status code) and how many.
    pub fn evictions(&self) -> Vec<((String, String, u16), u64)> {
        let e = self.evictions.lock().unwrap_or_else(|p| p.into_inner());
        e.iter().map(|(k, n)| (k.clone(), *n)).collect()
    }

    /// Counts one request.
    pub fn record(&self, key: RequestKey) {
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        *c.entry(key).or_insert(0) += 1;
    }

    /// Notes the connection a request of `user` with User-Agent `user_agent` came on.
    pub fn record_connection(&self, connection: u64, user: &str, user_agent: &str) {
        let mut c = self.connections.lock().unwrap_or_else(|p| p.into_inner());
        c.entry(connection)
            .or_insert_with(|| (user.to_string(), user_agent.to_string()));
    }

    /// Connections that carried requests of the user and User-Agent a query names (its other
    /// fields are ignored: a connection carries any mix of verbs and resources).
    pub fn connections(&self, q: &Query) -> usize {
        let c = self.connections.lock().unwrap_or_else(|p| p.into_inner());
        c.values()
            .filter(|(user, agent)| {
                q.user.as_ref().is_none_or(|u| u == user)
                    && q.user_agent
                        .as_ref()
                        .is_none_or(|a| agent.contains(a.as_str()))
            })
            .count()
    }

    /// Counts the status code of one answered request.
    pub fn record_status(&self, key: &RequestKey, code: u16) {
        let mut c = self.statuses.lock().unwrap_or_else(|p| p.into_inner());
        *c.entry((key.clone(), code)).or_insert(0) += 1;
    }

    /// Number of responses with status `code` to the requests a query matches.
    pub fn count_status(&self, q: &Query, code: u16) -> u64 {
        let c = self.statuses.lock().unwrap_or_else(|p| p.into_inner());
        c.iter()
            .filter(|((k, status), _)| *status == code && q.matches(k))
            .map(|(_, n)| *n)
            .sum()
    }

    /// All counters.
    pub fn snapshot(&self) -> Vec<(RequestKey, u64)> {
        let c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<(RequestKey, u64)> = c.iter().map(|(k, n)| (k.clone(), *n)).collect();
        v.sort_by_key(|e| std::cmp::Reverse(e.1));
        v
    }

    /// Sum of the counters a query matches.
    pub fn count(&self, q: &Query) -> u64 {
        let c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        c.iter()
            .filter(|(k, _)| q.matches(k))
            .map(|(_, n)| *n)
            .sum()
    }

    /// Forgets everything.
    pub fn reset(&self) {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.statuses
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.connections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.evictions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// The counters as JSON (for the debug endpoint).
    pub fn to_json(&self) -> serde_json::Value {
        let items: Vec<serde_json::Value> = self
            .snapshot()
            .into_iter()
            .map(|(k, n)| {
                let mut v = serde_json::to_value(&k).unwrap_or_default();
                v["count"] = serde_json::json!(n);
                v
            })
            .collect();
        let total: u64 = items.iter().filter_map(|i| i["count"].as_u64()).sum();
        let statuses: Vec<serde_json::Value> = {
            let c = self.statuses.lock().unwrap_or_else(|p| p.into_inner());
            c.iter()
                .map(|((k, code), n)| {
                    let mut v = serde_json::to_value(k).unwrap_or_default();
                    v["code"] = serde_json::json!(code);
                    v["count"] = serde_json::json!(n);
                    v
                })
                .collect()
        };
        serde_json::json!({"total": total, "requests": items, "responses": statuses})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(agent: &str) -> RequestKey {
        RequestKey {
            verb: "create".into(),
            group: String::new(),
            resource: "pods".into(),
            subresource: "eviction".into(),
            user: String::new(),
            user_agent: agent.into(),
        }
    }

    #[test]
    fn status_codes_are_counted_per_client() {
        let accounting = Accounting::default();
        accounting.record_status(&key("nmo"), 429);
        accounting.record_status(&key("nmo"), 429);
        accounting.record_status(&key("nmo"), 201);
        accounting.record_status(&key("other"), 429);
        let nmo = Query::all().user_agent("nmo");
        assert_eq!(accounting.count_status(&nmo, 429), 2);
        assert_eq!(accounting.count_status(&nmo, 201), 1);
        accounting.reset();
        assert_eq!(accounting.count_status(&nmo, 429), 0);
    }

    #[test]
    fn connections_are_counted_once_each_under_their_first_client() {
        let accounting = Accounting::default();
        for connection in [1, 2, 2, 2, 3] {
            accounting.record_connection(connection, "nmo", "nmo/0.1");
        }
        accounting.record_connection(4, "driver", "bench");
        accounting.record_connection(3, "driver", "bench");
        assert_eq!(accounting.connections(&Query::all().user("nmo")), 3);
        assert_eq!(accounting.connections(&Query::all().user_agent("bench")), 1);
        assert_eq!(accounting.connections(&Query::all()), 4);
        accounting.reset();
        assert_eq!(accounting.connections(&Query::all()), 0);
    }
}
