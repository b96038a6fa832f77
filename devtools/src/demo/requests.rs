//! What one client cost the simulated API server, from the simulator's request accounting.

use std::collections::BTreeMap;

use serde::Serialize;

use nmo_sim::{Query, SimHandle};

/// Requests of one identity, by verb, with the evictions and the refusals among them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RequestTotals {
    /// Every request (watches counted once, when they are opened).
    pub total: u64,
    /// By Kubernetes verb (`create` includes evictions).
    pub by_verb: BTreeMap<String, u64>,
    /// By verb and resource (`patch nodemaintenances/status`).
    pub by_request: BTreeMap<String, u64>,
    /// Eviction requests (`create pods/eviction`), refused ones included.
    pub evictions: u64,
    /// Eviction responses by status code (201 evicted, 429 refused, 404 gone, ...).
    pub eviction_responses: BTreeMap<u16, u64>,
    /// Responses `429 Too Many Requests` (a PodDisruptionBudget refusing, mostly).
    pub too_many_requests: u64,
    /// Connections these requests came on (HTTP/2 multiplexes them; HTTP/1.1 needs one per
    /// request in flight, so one per watch).
    pub connections: usize,
}

impl RequestTotals {
    /// The totals of the requests `identity` matches (a User-Agent or a user query).
    pub fn of(sim: &SimHandle, identity: &Query) -> RequestTotals {
        let accounting = sim.accounting();
        let mut by_verb = BTreeMap::new();
        let mut by_request = BTreeMap::new();
        let mut total = 0;
        for (key, count) in accounting.snapshot() {
            if identity_matches(identity, &key) {
                *by_verb.entry(key.verb.clone()).or_insert(0) += count;
                let what = if key.subresource.is_empty() {
                    format!("{} {}", key.verb, key.resource)
                } else {
                    format!("{} {}/{}", key.verb, key.resource, key.subresource)
                };
                *by_request.entry(what).or_insert(0) += count;
                total += count;
            }
        }
        let eviction = identity.clone().resource("pods").subresource("eviction");
        let evictions = sim.requests(&eviction);
        let eviction_responses = [200, 201, 404, 409, 422, 429, 500, 503, 504]
            .into_iter()
            .map(|code| (code, accounting.count_status(&eviction, code)))
            .filter(|(_, n)| *n > 0)
            .collect();
        RequestTotals {
            total,
            by_verb,
            by_request,
            evictions,
            eviction_responses,
            too_many_requests: accounting.count_status(identity, 429),
            connections: accounting.connections(identity),
        }
    }

    /// Pods nmo removed: evictions accepted (201) and pods deleted.
    pub fn pods_removed(&self) -> u64 {
        self.eviction_responses.get(&201).copied().unwrap_or(0)
            + self.by_request.get("delete pods").copied().unwrap_or(0)
    }

    /// Requests other than evictions.
    pub fn other_than_evictions(&self) -> u64 {
        self.total.saturating_sub(self.evictions)
    }

    /// Deletes of pods: a drain removes a finished pod (Succeeded or Failed) that way, where it
    /// evicts a running one.
    pub fn pod_deletes(&self) -> u64 {
        self.by_request.get("delete pods").copied().unwrap_or(0)
    }

    /// Requests other than pod removals (evictions, refused ones included, and pod deletes):
    /// what an operator adds to the removals any drain makes.
    pub fn beyond_pod_removals(&self) -> u64 {
        self.other_than_evictions()
            .saturating_sub(self.pod_deletes())
    }

    /// Pod LISTs: nmo lists pods only to start a watch where the API server cannot send the
    /// initial objects in the watch itself (no streaming lists: etcd before 3.4.31 or 3.5.13).
    pub fn pod_lists(&self) -> u64 {
        self.by_request.get("list pods").copied().unwrap_or(0)
    }

    /// `verb=count` pairs, most frequent first.
    pub fn by_verb_line(&self) -> String {
        let mut verbs: Vec<(&String, &u64)> = self.by_verb.iter().collect();
        verbs.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        verbs
            .iter()
            .map(|(verb, count)| format!("{verb} {count}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Whether a counted request belongs to the identity. The accounting's own query matching is
/// private; only the identity fields (user, User-Agent) matter here.
fn identity_matches(identity: &Query, key: &nmo_sim::RequestKey) -> bool {
    identity.user.as_ref().is_none_or(|u| u == &key.user)
        && identity
            .user_agent
            .as_ref()
            .is_none_or(|ua| key.user_agent.contains(ua.as_str()))
}
