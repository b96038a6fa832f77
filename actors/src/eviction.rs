//! The eviction actor: the only caller of `Cluster::evict_pod`.
//!
//! - Per-PodDisruptionBudget gates: after a 429 naming a budget, the pods behind it are parked
//!   and the budget is probed with ONE eviction after an exponential backoff (with jitter,
//!   honouring Retry-After); a success sends the next one at once, and so on, one at a time. A
//!   tight budget therefore costs one call per backoff step, not one per pod.
//! - A cluster-wide token bucket and a cap on calls in flight protect the API server; a 429
//!   without a budget (API throttling) pauses everything for a backoff.
//! - A bounded set of held requests: beyond it, requests are refused back to the asker, who asks
//!   again on its retry tick.

mod messages;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use rand::Rng;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument;

use crate::config::Config;

use crate::model::PodRef;
use crate::observe::EvictionResult;
use crate::ports::{Cluster, ClusterError, EvictionOutcome};

pub use messages::{EvictionMsg, EvictionReply, EvictionReport, EvictionRequest, EvictionStats};

/// The eviction actor.
#[derive(Debug, Clone, Copy, Default)]
pub struct EvictionActor;

/// Arguments of [`EvictionActor`].
pub struct EvictionArgs {
    /// The cluster.
    pub cluster: Arc<dyn Cluster>,
    /// Tunables.
    pub config: Arc<Config>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Where {
    Ready,
    Parked,
    InFlight,
}

struct Held {
    req: EvictionRequest,
    at: Where,
    /// Eviction calls made for this request so far.
    attempts: u32,
    /// The span of the call in flight: its outcome is recorded when the call returns.
    attempt_span: Option<tracing::Span>,
}

impl Held {
    fn new(req: EvictionRequest, at: Where) -> Self {
        Held {
            req,
            at,
            attempts: 0,
            attempt_span: None,
        }
    }
}

/// What an eviction outcome is called in metrics and spans, and its HTTP status when known.
fn classify(result: &Result<EvictionOutcome, ClusterError>) -> (EvictionResult, Option<u16>) {
    match result {
        Ok(EvictionOutcome::Evicted) => (EvictionResult::Evicted, Some(201)),
        Ok(EvictionOutcome::NotFound) => (EvictionResult::NotFound, Some(404)),
        Ok(EvictionOutcome::BlockedByPdb { .. }) => (EvictionResult::BlockedByPdb, Some(429)),
        Ok(EvictionOutcome::Throttled { .. }) => (EvictionResult::Throttled, Some(429)),
        Ok(EvictionOutcome::TooManyPdbs { .. }) => (EvictionResult::TooManyPdbs, Some(500)),
        Ok(EvictionOutcome::NamespaceTerminating) => {
            (EvictionResult::NamespaceTerminating, Some(403))
        }
        Err(err) => {
            let status = match err {
                ClusterError::NotFound(_) => Some(404),
                ClusterError::Conflict(_) | ClusterError::AlreadyExists(_) => Some(409),
                ClusterError::Invalid(_) => Some(422),
                ClusterError::Forbidden(_) => Some(403),
                ClusterError::Transient(_) | ClusterError::Other(_) => None,
            };
            (EvictionResult::Error, status)
        }
    }
}

/// Backoff state of one PodDisruptionBudget (or of one namespace when the API did not name the
/// budget).
#[derive(Default)]
struct Gate {
    failures: u32,
    open_at: Option<Instant>,
    /// A probe for this gate is queued or in flight.
    probing: bool,
    parked: VecDeque<PodRef>,
    timer: Option<JoinHandle<()>>,
}

/// State of [`EvictionActor`].
pub struct EvictionState {
    cluster: Arc<dyn Cluster>,
    config: Arc<Config>,
    held: HashMap<PodRef, Held>,
    ready: VecDeque<PodRef>,
    gates: HashMap<String, Gate>,
    /// Which gate a pod was last refused by.
    pod_gate: HashMap<PodRef, String>,
    in_flight: usize,
    tokens: f64,
    refilled_at: Instant,
    global_until: Option<Instant>,
    global_failures: u32,
    pump_timer: Option<JoinHandle<()>>,
    stats: EvictionStats,
}

/// Exponential backoff with "equal jitter": between half and all of `base * 2^(failures-1)`,
/// capped at `max`, and never shorter than the server's Retry-After.
fn backoff(
    base: Duration,
    max: Duration,
    failures: u32,
    retry_after: Option<Duration>,
) -> Duration {
    let exp = failures.saturating_sub(1).min(20);
    let full = base.saturating_mul(1u32 << exp).min(max);
    let jitter: f64 = rand::rng().random_range(0.5..=1.0);
    let delay = full.mul_f64(jitter);
    retry_after.map_or(delay, |ra| delay.max(ra))
}

fn duration_ms(delay: Duration) -> u64 {
    u64::try_from(delay.as_millis()).unwrap_or(u64::MAX)
}

fn gate_key(pod: &PodRef, pdb: &Option<String>) -> String {
    match pdb {
        Some(name) => format!("{}/{}", pod.namespace, name),
        None => format!("{}/<unknown-pdb>", pod.namespace),
    }
}

fn reply(req: &EvictionRequest, reply: EvictionReply) {
    let report = EvictionReport {
        pod: req.pod.clone(),
        reply,
    };
    // The asker may be gone (maintenance deleted): nothing to tell then.
    let _ = req.reply_to.cast(report);
}

impl EvictionState {
    fn refill(&mut self) {
        let now = Instant::now();
        let elapsed = now.duration_since(self.refilled_at).as_secs_f64();
        self.refilled_at = now;
        let burst = f64::from(self.config.eviction_burst.max(1));
        self.tokens = (self.tokens + elapsed * self.config.eviction_rate_per_sec).min(burst);
    }

    fn schedule_pump(&mut self, myself: &ActorRef<EvictionMsg>, after: Duration) {
        if let Some(timer) = self.pump_timer.take() {
            timer.abort();
        }
        let actor = myself.clone();
        self.pump_timer = Some(tokio::spawn(async move {
            tokio::time::sleep(after).await;
            let _ = actor.cast(EvictionMsg::Pump);
        }));
    }

    fn pump(&mut self, myself: &ActorRef<EvictionMsg>) {
        self.refill();
        while self.in_flight < self.config.eviction_max_in_flight.max(1) {
            let Some(pod) = self.ready.front().cloned() else {
                return;
            };
            if let Some(until) = self.global_until {
                let now = Instant::now();
                if until > now {
                    self.schedule_pump(myself, until - now);
                    return;
                }
                self.global_until = None;
            }
            if self.tokens < 1.0 {
                let rate = self.config.eviction_rate_per_sec.max(0.001);
                let wait = Duration::from_secs_f64((1.0 - self.tokens) / rate);
                self.schedule_pump(myself, wait);
                return;
            }
            self.ready.pop_front();
            let Some(held) = self.held.get_mut(&pod) else {
                continue; // cancelled while queued
            };
            if held.at != Where::Ready {
                continue; // stale queue entry
            }
            held.at = Where::InFlight;
            held.attempts = held.attempts.saturating_add(1);
            self.tokens -= 1.0;
            self.in_flight += 1;
            self.stats.calls += 1;
            let cluster = self.cluster.clone();
            let actor = myself.clone();
            // One short span per call, a child of the asking drain's span: a drain blocked for
            // hours still exports each attempt as it ends.
            let span = tracing::info_span!(
                parent: &held.req.span,
                "evict_pod",
                pod.namespace = %pod.namespace,
                pod.name = %pod.name,
                attempt = held.attempts,
                outcome = tracing::field::Empty,
                http.status_code = tracing::field::Empty,
                pdb = tracing::field::Empty,
                backoff_ms = tracing::field::Empty,
                otel.status_code = tracing::field::Empty,
            );
            held.attempt_span = Some(span.clone());
            let grace = held.req.grace_period_seconds;
            tokio::spawn(
                async move {
                    let result = cluster.evict_pod(&pod.namespace, &pod.name, grace).await;
                    let _ = actor.cast(EvictionMsg::Done { pod, result });
                }
                .instrument(span),
            );
        }
    }

    fn enqueue(&mut self, myself: &ActorRef<EvictionMsg>, req: EvictionRequest) {
        if let Some(existing) = self.held.get_mut(&req.pod) {
            // Already held: keep the newest reply address, do not duplicate.
            existing.req.reply_to = req.reply_to;
            return;
        }
        if self.held.len() >= self.config.eviction_queue_bound {
            self.stats.refused += 1;
            self.config.observer.eviction(EvictionResult::QueueFull);
            reply(&req, EvictionReply::Refused);
            return;
        }
        let pod = req.pod.clone();
        // A pod already known to sit behind a closed budget waits with the others.
        let gate = self
            .pod_gate
            .get(&pod)
            .and_then(|key| self.gates.get_mut(key))
            .filter(|gate| gate.open_at.is_some() || gate.probing);
        match gate {
            Some(gate) => {
                gate.parked.push_back(pod.clone());
                self.held.insert(pod, Held::new(req, Where::Parked));
            }
            None => {
                self.ready.push_back(pod.clone());
                self.held.insert(pod, Held::new(req, Where::Ready));
            }
        }
        self.pump(myself);
    }

    /// Closes a budget's gate; returns the backoff chosen, or None when the gate was already
    /// closed by an earlier refusal (the backoff is not lengthened).
    fn close_gate(
        &mut self,
        myself: &ActorRef<EvictionMsg>,
        key: &str,
        retry_after: Option<Duration>,
    ) -> Option<Duration> {
        let (base, max) = (self.config.backoff_base, self.config.backoff_max);
        let gate = self.gates.entry(key.to_string()).or_default();
        let now = Instant::now();
        // 429s of calls that were already in flight when the gate closed do not lengthen the
        // backoff: the budget failed once, not once per pod.
        let already_closed = gate.open_at.is_some_and(|at| at > now);
        if already_closed && !gate.probing {
            return None;
        }
        gate.probing = false;
        gate.failures = gate.failures.saturating_add(1);
        let delay = backoff(base, max, gate.failures, retry_after);
        gate.open_at = Some(now + delay);
        if let Some(timer) = gate.timer.take() {
            timer.abort();
        }
        let actor = myself.clone();
        let key = key.to_string();
        gate.timer = Some(tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = actor.cast(EvictionMsg::GateOpen(key));
        }));
        Some(delay)
    }

    fn open_gate(&mut self, myself: &ActorRef<EvictionMsg>, key: &str) {
        let Some(gate) = self.gates.get_mut(key) else {
            return;
        };
        if gate.open_at.is_some_and(|at| at > Instant::now()) || gate.probing {
            return;
        }
        // Send one probe; the rest stay parked until it succeeds.
        while let Some(pod) = gate.parked.pop_front() {
            if let Some(held) = self.held.get_mut(&pod)
                && held.at == Where::Parked
            {
                held.at = Where::Ready;
                gate.probing = true;
                self.ready.push_front(pod);
                break;
            }
        }
        if !gate.probing && gate.parked.is_empty() {
            // Nothing waits behind this budget any more; forget its backoff only once a call
            // succeeds (a new request for a known pod would otherwise hammer it again).
            gate.open_at = None;
        }
        self.pump(myself);
    }

    /// A budget that refused before accepted an eviction. Its parked pods go on one at a time
    /// (the next is sent at once, with the backoff reset): releasing them all together would
    /// earn a 429 for every pod but one whenever the budget allows a single disruption, the
    /// usual `maxUnavailable: 1`.
    fn budget_accepted(&mut self, myself: &ActorRef<EvictionMsg>, key: &str) {
        let Some(gate) = self.gates.get_mut(key) else {
            return;
        };
        if gate.parked.is_empty() {
            self.release_gate(key);
            return;
        }
        if let Some(timer) = gate.timer.take() {
            timer.abort();
        }
        gate.failures = 0;
        gate.open_at = None;
        gate.probing = false;
        self.open_gate(myself, key);
    }

    fn release_gate(&mut self, key: &str) {
        let Some(mut gate) = self.gates.remove(key) else {
            return;
        };
        if let Some(timer) = gate.timer.take() {
            timer.abort();
        }
        for pod in gate.parked.drain(..).rev() {
            if let Some(held) = self.held.get_mut(&pod)
                && held.at == Where::Parked
            {
                held.at = Where::Ready;
                self.ready.push_front(pod);
            }
        }
    }

    fn done(
        &mut self,
        myself: &ActorRef<EvictionMsg>,
        pod: PodRef,
        result: Result<EvictionOutcome, ClusterError>,
    ) {
        self.in_flight = self.in_flight.saturating_sub(1);
        let mut held = self.held.remove(&pod).filter(|h| h.at == Where::InFlight);
        let (counted, status) = classify(&result);
        self.config.observer.eviction(counted);
        // The attempt's span ends once the last handle is gone: take ours out of the request.
        let span = held
            .as_mut()
            .and_then(|h| h.attempt_span.take())
            .unwrap_or_else(tracing::Span::none);
        span.record("outcome", counted.as_str());
        if let Some(status) = status {
            span.record("http.status_code", status);
        }
        match result {
            Ok(EvictionOutcome::Evicted | EvictionOutcome::NotFound) => {
                if let Some(key) = self.pod_gate.remove(&pod) {
                    self.budget_accepted(myself, &key);
                }
                self.global_failures = 0;
                if let Some(h) = held {
                    reply(&h.req, EvictionReply::Done);
                }
            }
            Ok(EvictionOutcome::BlockedByPdb {
                pdb,
                message,
                retry_after,
            }) => {
                self.stats.blocked += 1;
                let key = gate_key(&pod, &pdb);
                self.pod_gate.insert(pod.clone(), key.clone());
                let delay = self.close_gate(myself, &key, retry_after);
                if let Some(name) = &pdb {
                    span.record("pdb", name.as_str());
                }
                if let Some(delay) = delay {
                    span.record("backoff_ms", duration_ms(delay));
                }
                span.in_scope(|| tracing::info!(refusal = %message, "blocked by a PodDisruptionBudget, waiting for its backoff"));
                if let Some(mut h) = held {
                    reply(&h.req, EvictionReply::Blocked { pdb, message });
                    h.at = Where::Parked;
                    if let Some(gate) = self.gates.get_mut(&key) {
                        gate.parked.push_back(pod.clone());
                    }
                    self.held.insert(pod, h);
                }
            }
            Ok(EvictionOutcome::Throttled { retry_after }) => {
                self.stats.throttled += 1;
                let now = Instant::now();
                if self.global_until.is_none_or(|until| until <= now) {
                    self.global_failures = self.global_failures.saturating_add(1);
                    let delay = backoff(
                        self.config.backoff_base,
                        self.config.backoff_max,
                        self.global_failures,
                        retry_after,
                    );
                    self.global_until = Some(now + delay);
                    span.record("backoff_ms", duration_ms(delay));
                }
                span.in_scope(|| {
                    tracing::info!("throttled by the API server, pausing every eviction")
                });
                if let Some(mut h) = held {
                    h.at = Where::Ready;
                    self.held.insert(pod.clone(), h);
                    self.ready.push_front(pod);
                }
            }
            Ok(EvictionOutcome::TooManyPdbs { message }) => {
                if let Some(h) = held {
                    reply(&h.req, EvictionReply::TooManyPdbs { message });
                }
            }
            Ok(EvictionOutcome::NamespaceTerminating) => {
                if let Some(h) = held {
                    reply(&h.req, EvictionReply::NamespaceTerminating);
                }
            }
            Err(err) => {
                span.record("otel.status_code", "ERROR");
                span.in_scope(|| tracing::warn!(error = %err, "eviction failed"));
                if let Some(h) = held {
                    reply(&h.req, EvictionReply::Failed(err.to_string()));
                }
            }
        }
        self.pump(myself);
    }

    fn cancel(&mut self, maintenance: &str) {
        // In-flight calls cannot be recalled; their outcome is dropped (no reply).
        self.held.retain(|_, h| {
            let keep = h.req.maintenance != maintenance;
            if !keep && let Some(span) = &h.attempt_span {
                span.record("outcome", "cancelled");
            }
            keep
        });
        let held = &self.held;
        self.ready.retain(|pod| held.contains_key(pod));
        for gate in self.gates.values_mut() {
            gate.parked.retain(|pod| held.contains_key(pod));
        }
    }
}

impl Actor for EvictionActor {
    type Msg = EvictionMsg;
    type State = EvictionState;
    type Arguments = EvictionArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: EvictionArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let tokens = f64::from(args.config.eviction_burst.max(1));
        Ok(EvictionState {
            cluster: args.cluster,
            config: args.config,
            held: HashMap::new(),
            ready: VecDeque::new(),
            gates: HashMap::new(),
            pod_gate: HashMap::new(),
            in_flight: 0,
            tokens,
            refilled_at: Instant::now(),
            global_until: None,
            global_failures: 0,
            pump_timer: None,
            stats: EvictionStats::default(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(timer) = state.pump_timer.take() {
            timer.abort();
        }
        for gate in state.gates.values_mut() {
            if let Some(timer) = gate.timer.take() {
                timer.abort();
            }
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            EvictionMsg::Evict(req) => state.enqueue(&myself, req),
            EvictionMsg::Cancel { maintenance } => state.cancel(&maintenance),
            EvictionMsg::Pump => {
                state.pump_timer = None;
                state.pump(&myself);
            }
            EvictionMsg::GateOpen(key) => state.open_gate(&myself, &key),
            EvictionMsg::Done { pod, result } => state.done(&myself, pod, result),
            EvictionMsg::Stats(port) => {
                let mut stats = state.stats;
                stats.held = state.held.len();
                let _ = port.send(stats);
            }
        }
        let waiting = state.held.len().saturating_sub(state.in_flight);
        state
            .config
            .observer
            .eviction_queue(waiting, state.in_flight);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_capped_and_honours_retry_after() {
        let (base, max) = (Duration::from_secs(1), Duration::from_secs(60));
        for _ in 0..50 {
            let first = backoff(base, max, 1, None);
            assert!(first >= Duration::from_millis(500) && first <= base);
            let fourth = backoff(base, max, 4, None);
            assert!(fourth >= Duration::from_secs(4) && fourth <= Duration::from_secs(8));
            let capped = backoff(base, max, 30, None);
            assert!(capped >= Duration::from_secs(30) && capped <= max);
            let ra = backoff(base, max, 1, Some(Duration::from_secs(10)));
            assert_eq!(ra, Duration::from_secs(10));
        }
    }

    #[test]
    fn gate_key_names_the_budget_or_the_namespace() {
        let pod = PodRef {
            namespace: "ns".into(),
            name: "p".into(),
        };
        assert_eq!(gate_key(&pod, &Some("web".into())), "ns/web");
        assert_eq!(gate_key(&pod, &None), "ns/<unknown-pdb>");
    }
}
