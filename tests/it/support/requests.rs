//! Counting nmo's requests on either backend: the simulator's request accounting (nmo's
//! client by its User-Agent), or the real API server's audit log (nmo's ServiceAccount, the
//! one user the binary's audit policy logs). A test that counts with these runs on both.

use nmo_sim::Query;

use super::TestEnv;
use super::backend::{Cluster, OPERATOR_AGENT};

impl TestEnv {
    /// How many requests of nmo's client `query` matches (its verb, resource and subresource;
    /// the user and User-Agent are nmo's) since the test began or since the last
    /// [`TestEnv::forget_operator_requests`].
    pub fn count_operator_requests(&self, query: &Query) -> u64 {
        match &self.cluster {
            Cluster::Sim(sim) => sim.requests(&query.clone().user_agent(OPERATOR_AGENT)),
            Cluster::Real(real) => {
                let matches = |wanted: &Option<String>, actual: &str| {
                    wanted.as_deref().is_none_or(|wanted| wanted == actual)
                };
                let count = real
                    .operator_requests()
                    .iter()
                    .filter(|r| {
                        matches(&query.verb, &r.verb)
                            && matches(&query.resource, &r.resource)
                            && matches(&query.subresource, &r.subresource)
                    })
                    .count();
                u64::try_from(count).unwrap_or(u64::MAX)
            }
        }
    }

    /// Forgets nmo's requests so far: counting starts again from now (the simulator's counters
    /// are reset; on the real backend the audit log is read from its current end).
    pub fn forget_operator_requests(&self) {
        match &self.cluster {
            Cluster::Sim(sim) => sim.accounting().reset(),
            Cluster::Real(real) => real.forget_operator_requests(),
        }
    }

    /// nmo's requests as `count verb group/resource/subresource` lines, for a failure message
    /// or a report.
    pub fn operator_requests_report(&self) -> Vec<String> {
        match &self.cluster {
            Cluster::Sim(sim) => sim
                .accounting()
                .snapshot()
                .into_iter()
                .filter(|(key, _)| key.user_agent == OPERATOR_AGENT)
                .map(|(key, count)| {
                    format!(
                        "{count} {} {}/{} {}",
                        key.verb, key.group, key.resource, key.subresource
                    )
                })
                .collect(),
            Cluster::Real(real) => {
                let requests = real.operator_requests();
                nmo_envtest::audit::count_by(&requests, |r| {
                    format!("{} {}/{} {}", r.verb, r.group, r.resource, r.subresource)
                })
                .into_iter()
                .map(|(key, count)| format!("{count} {key}"))
                .collect()
            }
        }
    }
}
