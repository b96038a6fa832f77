//! The eviction actor: the only caller of `Cluster::evict_pod`.
//!
//! - Per-PodDisruptionBudget gates (`gate`): after a 429 naming a PDB, the pods behind it
//!   are parked and the PDB is probed with ONE eviction after an exponential backoff (with
//!   jitter, honouring Retry-After); a success sends the next one at once, one at a time.
//! - A cluster-wide token bucket (`bucket`) and a cap on calls in flight protect the API
//!   server; a 429 without a PDB (API throttling) pauses everything for a backoff, and halves
//!   the cap on calls in flight, which grows back slowly (`concurrency`).
//! - A bounded set of held requests: beyond it, requests are refused back to the asker, who asks
//!   again on its retry tick.
//!
//! - PDB-driven gating (`pdb_gates`, `pdb_flow`): one shared PodDisruptionBudget watch
//!   tells how many disruptions each PDB allows; a pod whose PDB allows none is not sent
//!   but waits on its PDB, and when the PDB's status changes exactly as many waiting pods
//!   go as it allows, across every node's requests. The 429 gates above are the fallback for
//!   what the status cannot tell (no list yet, a stale status, a PDB that refused anyway).
//! - Diagnosis (`diagnoses`): why a PDB blocks (waiting for a named replacement, the
//!   replacement cannot be scheduled, a cross-node deadlock, a PDB that never allows, several
//!   PDBs), found once per blocked PDB with a few bounded reads, and told to every asker
//!   waiting on it.
//!
//! Askers get their answers as [`EvictionReport`]s through the `reply_to` of their request: the
//! eviction actor knows nothing else about them.

mod answers;
pub(crate) mod backoff;
mod bucket;
mod concurrency;
mod diagnoses;
mod gate;
mod held;
mod intercepted;
mod messages;
mod outcome;
mod pdb_flow;
mod pdb_gates;
mod reask;
mod requests;
mod tally;
mod withdraw;

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::time::Instant;

pub use messages::{
    EvictionMsg, EvictionReply, EvictionReport, EvictionRequest, EvictionStats, Wake, WatchKind,
};

use crate::config::Config;
use crate::observe::EvictionResult;
use crate::ports::Cluster;
use crate::task::{TaskSet, TaskSlot};
use crate::timers::Timers;
use backoff::{Throttle, backoff, throttle_pause};
use bucket::TokenBucket;
use concurrency::Concurrency;
use diagnoses::Diagnoses;
use gate::Gates;
use held::{Held, Where};
use intercepted::Interceptors;
use pdb_gates::PdbGates;
use requests::Requests;
use tally::Tally;

/// The shortest wait of the pump timer, and the period whose tokens it sends together (see
/// [`batch_wait`]). An empty bucket at a high rate would wake the actor for each token (a
/// thousand times a second at `--eviction-rate 1000`); waking for twenty at a time sends the
/// same evictions at the same rate with a fraction of the wake-ups. At nmo's default rate
/// (50/s) a token takes 20 ms, so this changes nothing there.
const PUMP_GRANULARITY: Duration = Duration::from_millis(20);

/// How long before a watch that ended is subscribed again (the adapter retries errors itself).
const WATCH_RETRY: Duration = Duration::from_secs(1);

/// When to pump, asked at `now` to pump after `after` while a pump is `pending` at that time:
/// None keeps the pending one (it comes no later).
fn next_pump(now: Instant, after: Duration, pending: Option<Instant>) -> Option<Instant> {
    let at = now + after.max(PUMP_GRANULARITY);
    match pending {
        Some(due) if due <= at => None,
        _ => Some(at),
    }
}

/// How long the pump waits before it sends, with `queued` requests ready (None: send now).
/// While rate limited it waits for a granule's worth of tokens, or for as many as the queue
/// needs: every answer frees a token, and sending one eviction per answer made a wake-up, a
/// write and a watch event for each, where a batch shares them. The rate stays the same.
fn batch_wait(bucket: &TokenBucket, queued: usize) -> Option<Duration> {
    if queued == 0 {
        return None;
    }
    bucket.wait_for(bucket.earned_in(PUMP_GRANULARITY).min(queued as f64))
}

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

/// State of [`EvictionActor`].
pub struct EvictionState {
    cluster: Arc<dyn Cluster>,
    config: Arc<Config>,
    /// The requests held, the ready queue and the calls out.
    requests: Requests,
    /// The 429 gates of the budgets that refused.
    gates: Gates,
    bucket: TokenBucket,
    throttle: Throttle,
    /// The calls that may be out at once: the configured cap, less after throttling.
    concurrency: Concurrency,
    /// The eviction calls in flight: aborted and awaited when the actor stops.
    calls: TaskSet,
    /// What happened, counted.
    tally: Tally,
    /// The watched PDBs and the pods waiting on them.
    pdbs: PdbGates,
    /// Why each blocked PDB blocks, and when to look again.
    diagnoses: Diagnoses,
    /// The task forwarding the PDB watch.
    pdb_watch: TaskSlot,
    /// The webhooks on `pods/eviction`, and the re-asks of the pods something intercepts.
    interceptors: Interceptors,
    /// Every timer of the actor: the pump, each closed gate's and each blocked PDB's, the
    /// expiry of unconfirmed evictions, the re-asks and the watches' re-subscriptions.
    timers: Timers<EvictionMsg>,
}

impl EvictionState {
    /// The backoff after `failures` refusals in a row, as configured.
    fn backoff(&self, retry_after: Option<Duration>) -> impl FnOnce(u32) -> Duration + use<> {
        let (base, max) = (self.config.backoff_base, self.config.backoff_max);
        move |failures| backoff(base, max, failures, retry_after)
    }

    /// The global pause after the `failures`th throttling in a row, as configured.
    fn throttle_pause(
        &self,
        retry_after: Option<Duration>,
    ) -> impl FnOnce(u32) -> Duration + use<> {
        let (base, max) = (self.config.backoff_base, self.config.backoff_max);
        move |failures| throttle_pause(base, max, failures, retry_after)
    }

    /// Pumps again after `after` (at least [`PUMP_GRANULARITY`]), unless a pump already due
    /// by then is scheduled: every request and answer pumps, and at a high rate each found the
    /// bucket empty and replaced the timer (a timer task spawned and one aborted per eviction).
    fn schedule_pump(&mut self, after: Duration) {
        let now = Instant::now();
        if let Some(at) = next_pump(now, after, self.timers.due(&Wake::Pump)) {
            self.timers.set(Wake::Pump, at - now);
        }
    }

    /// Sends what the throttle, the rate limit and the in-flight cap allow, oldest first.
    fn pump(&mut self, myself: &ActorRef<EvictionMsg>) {
        self.bucket.refill(Instant::now());
        if let Some(wait) = batch_wait(&self.bucket, self.requests.queued()) {
            self.schedule_pump(wait);
            return;
        }
        while self.requests.in_flight() < self.concurrency.limit() {
            if self.requests.next_queued().is_none() {
                return;
            }
            if let Some(wait) = self.throttle.wait(Instant::now()) {
                self.schedule_pump(wait);
                return;
            }
            if let Some(wait) = self.bucket.wait() {
                self.schedule_pump(wait);
                return;
            }
            let Some(held) = self.requests.send_next(self.pdbs.changes()) else {
                continue; // cancelled or moved while queued: a stale queue entry
            };
            let pod = held.req().pod.clone();
            self.bucket.take();
            self.tally.called();
            // One short span per call, a child of the asking drain's span: a drain blocked for
            // hours still exports each attempt as it ends.
            let span = tracing::info_span!(
                parent: &held.req().span,
                "evict_pod",
                k8s.namespace.name = %pod.namespace,
                k8s.pod.name = %pod.name,
                nmo.attempt = held.attempts(),
                nmo.outcome = tracing::field::Empty,
                http.response.status_code = tracing::field::Empty,
                nmo.pdb = tracing::field::Empty,
                nmo.backoff_ms = tracing::field::Empty,
                otel.status_code = tracing::field::Empty,
            );
            held.trace_attempt(span.clone());
            let grace = held.req().grace_period_seconds;
            let uid = held.req().uid.clone();
            let cluster = self.cluster.clone();
            let call = pod.clone();
            let precondition = uid.clone();
            self.calls.spawn_cast_back(
                myself,
                span,
                async move {
                    cluster
                        .evict_pod(&call.namespace, &call.name, &precondition, grace)
                        .await
                },
                move |result| EvictionMsg::Done { pod, uid, result },
            );
        }
    }

    fn enqueue(&mut self, myself: &ActorRef<EvictionMsg>, req: EvictionRequest) {
        if let Some(existing) = self.requests.get_mut(&req.pod) {
            if existing.req().uid == req.uid {
                // Already held: keep the newest reply address, do not duplicate.
                existing.answer_to(req.reply_to);
                return;
            }
            // The name belongs to another pod now, and its asker did not withdraw the old
            // one: the old request goes, the new one is taken as new.
            let (pod, uid) = (req.pod.clone(), existing.req().uid.clone());
            self.withdraw(&pod, &uid);
        }
        if self.requests.len() >= self.config.eviction_queue_bound {
            self.tally.refused();
            self.config.observer.eviction(EvictionResult::QueueFull);
            Held::new(req, Where::Ready).reply(EvictionReply::Refused);
            return;
        }
        let pod = req.pod.clone();
        self.config.observer.eviction_queued();
        let interception = self.interceptors.for_request(&req);
        if interception.is_intercepted() {
            let mut held = Held::new(req, Where::Ready);
            held.intercepted_as(interception);
            self.enqueue_intercepted(held);
        } else if self.gates.park_if_closed(&pod) {
            // A pod already known to sit behind a closed budget waits with the others.
            self.requests.arrived(Held::new(req, Where::Parked));
        } else {
            self.requests.arrived(Held::new(req, Where::Ready));
            if self.decide(&pod) {
                self.requests.queue(pod);
            }
        }
        self.pump(myself);
    }

    /// Gate `key` may open: its probe goes to the front of the queue.
    fn open_gate(&mut self, myself: &ActorRef<EvictionMsg>, key: &str) {
        let requests = &self.requests;
        let probe = self.gates.open(key, Instant::now(), |pod| {
            requests.get(pod).is_some_and(|h| h.at() == Where::Parked)
        });
        if let Some(pod) = probe {
            if let Some(held) = self.requests.get_mut(&pod) {
                held.move_to(Where::Ready);
            }
            self.requests.queue_first(pod);
        }
        self.pump(myself);
    }

    /// One of the actor's timers fired.
    fn woken(&mut self, myself: &ActorRef<EvictionMsg>, wake: Wake) {
        match wake {
            Wake::Pump => self.pump(myself),
            Wake::GateOpen(key) => self.open_gate(myself, &key),
            Wake::Diagnose(key) => self.diagnose(myself, &key),
            Wake::Expire => self.expire(myself),
            Wake::Reask => self.reask_due(myself),
            Wake::Resubscribe(WatchKind::Pdbs) => self.watch_pdbs(myself),
            Wake::Resubscribe(WatchKind::Webhooks) => self.watch_webhooks(myself),
        }
    }

    fn cancel(&mut self, maintenance: &str) {
        // In-flight calls cannot be recalled; their outcome is dropped (no reply). A request
        // cancelled before its call went out frees its place in its PDB.
        let (cancelled, cancelled_unsent) = self.requests.cancelled(maintenance);
        for pod in &cancelled {
            self.interceptors.forget(pod);
        }
        let requests = &self.requests;
        for key in self.gates.prune(|pod| requests.holds(pod)) {
            self.timers.cancel(&Wake::GateOpen(key));
        }
        self.pdbs.retain_waiting(|pod| requests.holds(pod));
        for pod in cancelled_unsent {
            self.pdbs.forget(&pod);
        }
        self.forget_unblocked();
    }
}

impl Actor for EvictionActor {
    type Msg = EvictionMsg;
    type State = EvictionState;
    type Arguments = EvictionArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: EvictionArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let bucket = TokenBucket::new(
            args.config.eviction_rate_per_sec,
            args.config.eviction_burst,
            Instant::now(),
        );
        let concurrency = Concurrency::new(args.config.eviction_max_in_flight);
        Ok(EvictionState {
            cluster: args.cluster,
            config: args.config,
            requests: Requests::default(),
            gates: Gates::default(),
            bucket,
            throttle: Throttle::default(),
            concurrency,
            calls: TaskSet::default(),
            tally: Tally::default(),
            pdbs: PdbGates::default(),
            diagnoses: Diagnoses::default(),
            pdb_watch: TaskSlot::default(),
            interceptors: Interceptors::default(),
            timers: Timers::new(myself),
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.watch_pdbs(&myself);
        state.watch_webhooks(&myself);
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.timers.cancel_all();
        state.calls.cancel_all().await;
        state.stop_watching_pdbs();
        state.interceptors.stop();
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
            EvictionMsg::Withdraw { pod, uid } => state.withdraw(&pod, &uid),
            EvictionMsg::Cancel { maintenance } => state.cancel(&maintenance),
            EvictionMsg::Wake(wake) => state.woken(&myself, wake),
            EvictionMsg::WatchEnded(kind) => state.timers.set(Wake::Resubscribe(kind), WATCH_RETRY),
            EvictionMsg::Done { pod, uid, result } => state.done(&myself, pod, &uid, result),
            EvictionMsg::Stats(port) => {
                let mut stats = state.tally.counted();
                stats.held = state.requests.len();
                (stats.gates, stats.gated_pods) = state.gates.sizes();
                stats.reasks = state.interceptors.planned();
                stats.in_flight_limit = state.concurrency.limit();
                let _ = port.send(stats);
            }
            EvictionMsg::Pdbs(change) => state.on_pdbs(&myself, change),
            EvictionMsg::Diagnosed { key, investigation } => {
                state.diagnosed(&key, investigation);
            }
            EvictionMsg::Webhooks(webhooks) => state.on_webhooks(&myself, webhooks),
        }
        let (waiting, in_flight) = (state.requests.waiting(), state.requests.in_flight());
        state.config.observer.eviction_queue(waiting, in_flight);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
