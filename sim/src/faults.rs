//! Fault injection: added latency, error rates, 409 storms on writes, watch streams closed early,
//! a server that is down (every request answered 503; with the connections dropped and the
//! watch history expired: `SimHandle::restart_api_server`).

use std::sync::Mutex;
use std::time::Duration;

use rand::Rng;

/// One rule; `None` matchers match anything.
#[derive(Debug, Clone, Default)]
pub struct FaultRule {
    /// Verb to match (get, list, watch, create, update, patch, delete).
    pub verb: Option<String>,
    /// Resource plural to match.
    pub resource: Option<String>,
    /// Subresource to match ("" for the main resource).
    pub subresource: Option<String>,
    /// User-Agent substring to match.
    pub user_agent: Option<String>,
    /// User (bearer token identity) to match.
    pub user: Option<String>,
    /// Added latency before the request is served.
    pub latency: Option<Duration>,
    /// Probability (0..=1) that `latency` applies to a matching request (1 unless set by
    /// [`FaultRule::latency_sometimes`]).
    pub latency_rate: Option<f64>,
    /// Probability (0..=1) of failing with `error_code`.
    pub error_rate: f64,
    /// Code of injected errors (500, 503, 429, 504...).
    pub error_code: u16,
    /// Probability (0..=1) that an update/patch fails with a 409 Conflict.
    pub conflict_rate: f64,
    /// Close matching watch streams after this long.
    pub watch_close_after: Option<Duration>,
    /// Close matching watch streams after this many events.
    pub watch_close_after_events: Option<usize>,
    /// Apply only this many more times (None: forever).
    pub remaining: Option<u64>,
    /// When `latency` applies, the request takes effect after it whether or not its client
    /// still waits (see [`FaultRule::delivered_late`]).
    pub detached: bool,
}

impl FaultRule {
    /// A rule matching a verb and resource.
    pub fn on(verb: Option<&str>, resource: Option<&str>) -> Self {
        FaultRule {
            verb: verb.map(String::from),
            resource: resource.map(String::from),
            error_code: 500,
            ..Default::default()
        }
    }
    /// Adds latency.
    #[must_use]
    pub fn latency(mut self, d: Duration) -> Self {
        self.latency = Some(d);
        self
    }
    /// Every request answered 503 Service Unavailable (an API server that is down).
    pub fn unavailable() -> Self {
        FaultRule::on(None, None).errors(1.0, 503)
    }

    /// Fails a fraction of requests with a code.
    #[must_use]
    pub fn errors(mut self, rate: f64, code: u16) -> Self {
        self.error_rate = rate;
        self.error_code = code;
        self
    }
    /// Fails a fraction of updates/patches with 409 Conflict.
    #[must_use]
    pub fn conflicts(mut self, rate: f64) -> Self {
        self.conflict_rate = rate;
        self
    }
    /// Closes watches early.
    #[must_use]
    pub fn close_watches_after(mut self, d: Option<Duration>, events: Option<usize>) -> Self {
        self.watch_close_after = d;
        self.watch_close_after_events = events;
        self
    }
    /// Limits how many times the rule fires.
    #[must_use]
    pub fn times(mut self, n: u64) -> Self {
        self.remaining = Some(n);
        self
    }
    /// Matches a subresource.
    #[must_use]
    pub fn subresource(mut self, s: &str) -> Self {
        self.subresource = Some(s.into());
        self
    }
    /// Matches a User-Agent substring.
    #[must_use]
    pub fn user_agent(mut self, ua: &str) -> Self {
        self.user_agent = Some(ua.into());
        self
    }
    /// Matches one user (the bearer token's identity).
    #[must_use]
    pub fn user(mut self, user: &str) -> Self {
        self.user = Some(user.into());
        self
    }
    /// Adds latency to a fraction `rate` of the matching requests only (e.g. answers later
    /// than a client's deadline, now and then).
    #[must_use]
    pub fn latency_sometimes(mut self, d: Duration, rate: f64) -> Self {
        self.latency = Some(d);
        self.latency_rate = Some(rate);
        self
    }

    /// A fraction `rate` of the matching requests takes effect `d` late, whether or not its
    /// client still waits for the answer: a request already on its way (in the kernel's
    /// buffers, or handed to HTTP/2) is delivered after a network delay or a stop of its
    /// process. (Plain latency ends with the client: a request it gave up on is never served.)
    #[must_use]
    pub fn delivered_late(mut self, d: Duration, rate: f64) -> Self {
        self.detached = true;
        self.latency_sometimes(d, rate)
    }
}

/// What the rules decided for one request.
#[derive(Debug, Default, Clone)]
pub struct Decision {
    /// Sleep this long first.
    pub latency: Duration,
    /// Fail with this code.
    pub error_code: Option<u16>,
    /// Fail with a 409 Conflict.
    pub conflict: bool,
    /// Watch: close after.
    pub watch_close_after: Option<Duration>,
    /// Watch: close after N events.
    pub watch_close_after_events: Option<usize>,
    /// Served after `latency` even if the client leaves meanwhile.
    pub delivered_late: bool,
}

/// The active rules.
#[derive(Debug, Default)]
pub struct Faults {
    rules: Mutex<Vec<(u64, FaultRule)>>,
    next: Mutex<u64>,
}

impl Faults {
    /// Adds a rule; returns its id.
    pub fn add(&self, rule: FaultRule) -> u64 {
        let mut n = self.next.lock().unwrap_or_else(|p| p.into_inner());
        *n += 1;
        let id = *n;
        self.rules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((id, rule));
        id
    }

    /// Removes a rule.
    pub fn remove(&self, id: u64) {
        self.rules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(i, _)| *i != id);
    }

    /// Removes every rule.
    pub fn clear(&self) {
        self.rules.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Evaluates the rules for a request (of no particular user).
    pub fn decide(&self, verb: &str, resource: &str, sub: &str, ua: &str) -> Decision {
        self.decide_for(verb, resource, sub, ua, "")
    }

    /// Evaluates the rules for a request of `user`.
    pub fn decide_for(
        &self,
        verb: &str,
        resource: &str,
        sub: &str,
        ua: &str,
        user: &str,
    ) -> Decision {
        let mut d = Decision::default();
        let mut rules = self.rules.lock().unwrap_or_else(|p| p.into_inner());
        if rules.is_empty() {
            return d;
        }
        let mut rng = rand::rng();
        for (_, r) in rules.iter_mut() {
            let m = r.verb.as_deref().is_none_or(|v| v == verb)
                && r.resource.as_deref().is_none_or(|x| x == resource)
                && r.subresource.as_deref().is_none_or(|x| x == sub)
                && r.user_agent.as_deref().is_none_or(|x| ua.contains(x))
                && r.user.as_deref().is_none_or(|x| x == user);
            if !m || r.remaining == Some(0) {
                continue;
            }
            let mut fired = false;
            if let Some(l) = r.latency
                && r.latency_rate
                    .is_none_or(|rate| rng.random_bool(rate.clamp(0.0, 1.0)))
            {
                d.latency += l;
                d.delivered_late |= r.detached;
                fired = true;
            }
            if r.error_rate > 0.0
                && d.error_code.is_none()
                && rng.random_bool(r.error_rate.clamp(0.0, 1.0))
            {
                d.error_code = Some(r.error_code);
                fired = true;
            }
            if r.conflict_rate > 0.0
                && (verb == "update" || verb == "patch")
                && rng.random_bool(r.conflict_rate.clamp(0.0, 1.0))
            {
                d.conflict = true;
                fired = true;
            }
            if verb == "watch"
                && (r.watch_close_after.is_some() || r.watch_close_after_events.is_some())
            {
                d.watch_close_after = r.watch_close_after.or(d.watch_close_after);
                d.watch_close_after_events =
                    r.watch_close_after_events.or(d.watch_close_after_events);
                fired = true;
            }
            if fired && let Some(n) = r.remaining.as_mut() {
                *n = n.saturating_sub(1);
            }
        }
        d
    }
}
