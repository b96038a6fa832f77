//! The eviction actor's answers: what each eviction call's outcome does to the asker (done,
//! blocked, refused, failed), to the PDB's gate and bookkeeping, and to the throttle.

use std::time::Duration;

use ractor::ActorRef;
use tokio::time::Instant;

use super::EvictionState;
use super::gate::Accepted;
use super::held::{Held, Where};
use super::messages::{EvictionMsg, EvictionReply, Wake};
use super::outcome;
use crate::model::{PodRef, Uid};
use crate::ports::{ClusterError, EvictionOutcome};

/// A budget's refusal, as the API gave it.
struct Refusal {
    pdb: Option<String>,
    message: String,
    retry_after: Option<Duration>,
}

fn duration_ms(delay: Duration) -> u64 {
    u64::try_from(delay.as_millis()).unwrap_or(u64::MAX)
}

impl EvictionState {
    /// `pod` is evicted or gone: the PDB that refused it before accepts again.
    fn pdb_accepted(&mut self, myself: &ActorRef<EvictionMsg>, pod: &PodRef) {
        match self.gates.accepted(pod) {
            Accepted::NoGate => {}
            Accepted::Released(key) => self.timers.cancel(&Wake::GateOpen(key)),
            Accepted::Reopened(key) => {
                self.timers.cancel(&Wake::GateOpen(key.clone()));
                self.open_gate(myself, &key);
            }
        }
    }

    /// The answer to `pod`'s eviction call: reply to its asker, and update the PDB's
    /// bookkeeping, the gates and the throttle by what the answer says (one match over the
    /// outcome and whether the request is intercepted; each case acts in a method of its own).
    pub(super) fn done(
        &mut self,
        myself: &ActorRef<EvictionMsg>,
        pod: PodRef,
        uid: &Uid,
        result: Result<EvictionOutcome, ClusterError>,
    ) {
        // Only the request whose call this was (see `Requests::answered`).
        let mut held = self.requests.answered(&pod, uid);
        let (counted, status) = outcome::classify(&result);
        self.config.observer.eviction(counted);
        // The attempt's span ends once the last handle is gone: take ours out of the request.
        let span = held
            .as_mut()
            .and_then(|h| h.take_attempt_span())
            .unwrap_or_else(tracing::Span::none);
        span.record("nmo.outcome", counted.as_str());
        if let Some(status) = status {
            span.record("http.response.status_code", status);
        }
        let intercepted = held
            .as_ref()
            .is_some_and(|h| h.interception().is_intercepted());
        match result {
            Ok(EvictionOutcome::Evicted) => {
                self.counted_by_pdb(&pod, true);
                self.evicted(myself, &pod, held);
            }
            Ok(EvictionOutcome::NotFound) => {
                self.counted_by_pdb(&pod, false);
                self.evicted(myself, &pod, held);
            }
            Ok(EvictionOutcome::BlockedByPdb { pdb, message, .. }) if intercepted => {
                self.intercepted_blocked_by_pdb(&pod, pdb, message, held, &span);
            }
            Ok(EvictionOutcome::DeniedByWebhook {
                webhook, message, ..
            }) => {
                self.counted_by_pdb(&pod, false);
                span.in_scope(|| tracing::info!(%webhook, refusal = %message, "eviction refused by an admission webhook, asking again"));
                if let Some(mut h) = held {
                    h.intercepted_by_webhook(&webhook);
                    self.intercepted_refusal(h, None, message);
                }
            }
            Ok(EvictionOutcome::BlockedByPdb {
                pdb,
                message,
                retry_after,
            }) => {
                let refusal = Refusal {
                    pdb,
                    message,
                    retry_after,
                };
                self.blocked_by_pdb(myself, pod, refusal, held, &span);
            }
            // Not answered: the pod keeps its place in its PDB.
            Ok(EvictionOutcome::Throttled { retry_after }) => {
                self.throttled(pod, retry_after, held, &span);
            }
            Ok(EvictionOutcome::TooManyPdbs { message }) => {
                self.counted_by_pdb(&pod, false);
                self.ended(&pod, held, EvictionReply::TooManyPdbs { message });
            }
            Ok(EvictionOutcome::NamespaceTerminating) => {
                self.counted_by_pdb(&pod, false);
                self.ended(&pod, held, EvictionReply::NamespaceTerminating);
            }
            Err(err) => {
                // The call may or may not have reached the API: counted until the TTL.
                self.counted_by_pdb(&pod, true);
                span.record("otel.status_code", "ERROR");
                span.in_scope(|| tracing::warn!(error = %err, "eviction failed"));
                self.ended(&pod, held, EvictionReply::Failed(err.to_string()));
            }
        }
        self.pump(myself);
    }

    /// The PDB's bookkeeping hears the answer for `pod`: an eviction that `counts` (accepted,
    /// or maybe: a failed call) counts against its PDB until the status shows it or it expires.
    fn counted_by_pdb(&mut self, pod: &PodRef, counts: bool) {
        self.pdbs.answered(pod, counts, Instant::now());
        if counts {
            self.schedule_expiry();
        }
    }

    /// Refused by the budget after the webhooks let the request through (KubeVirt marks the VM
    /// for migration and lets its budget answer): asked again with the interceptors' backoff,
    /// not the budget's.
    fn intercepted_blocked_by_pdb(
        &mut self,
        pod: &PodRef,
        pdb: Option<String>,
        message: String,
        held: Option<Box<Held>>,
        span: &tracing::Span,
    ) {
        self.tally.blocked();
        self.pdbs.refused(pod);
        if let Some(name) = &pdb {
            span.record("nmo.pdb", name.as_str());
        }
        span.in_scope(|| tracing::info!(refusal = %message, "intercepted eviction refused by its budget, asking again"));
        if let Some(h) = held {
            self.intercepted_refusal(h, pdb, message);
        }
    }

    /// `pod` is evicted or gone.
    fn evicted(&mut self, myself: &ActorRef<EvictionMsg>, pod: &PodRef, held: Option<Box<Held>>) {
        self.pdb_accepted(myself, pod);
        // Through API Priority and Fairness: the pause and the cap recover a little.
        self.throttle.passed(self.concurrency.ceiling());
        self.concurrency.passed();
        if let Some(h) = held {
            h.reply(EvictionReply::Done);
        }
    }

    /// `pod`'s PDB refused although its watched status allowed: the status is behind, the PDB
    /// takes the 429 path (its gate closes for a backoff) until its status changes.
    fn blocked_by_pdb(
        &mut self,
        myself: &ActorRef<EvictionMsg>,
        pod: PodRef,
        refusal: Refusal,
        held: Option<Box<Held>>,
        span: &tracing::Span,
    ) {
        let Refusal {
            pdb,
            message,
            retry_after,
        } = refusal;
        self.tally.blocked();
        self.pdbs.refused(&pod);
        let backoff = self.backoff(retry_after);
        let (key, delay) = self
            .gates
            .refused(&pod, pdb.as_deref(), Instant::now(), backoff);
        if let Some(delay) = delay {
            self.timers.set(Wake::GateOpen(key.clone()), delay);
        }
        if let Some(name) = &pdb {
            span.record("nmo.pdb", name.as_str());
        }
        if let Some(delay) = delay {
            span.record("nmo.backoff_ms", duration_ms(delay));
        }
        span.in_scope(|| tracing::info!(refusal = %message, "blocked by a PodDisruptionBudget, waiting for its backoff"));
        let Some(mut h) = held else {
            return;
        };
        let blocker = self.blocker_for(&key);
        h.tell_blocked(EvictionReply::Blocked {
            pdb,
            message,
            blocker,
        });
        let sent_at_change = h.sent_at_change();
        h.move_to(Where::Parked);
        self.gates.park(&key, pod);
        self.requests.held_again(h);
        self.note_blocked(&key);
        if self.pdbs.changed_since(&key, sent_at_change) {
            // The PDB's status changed while the call was out (a real API server's controller
            // writes it a moment after the spec changed): the refusal judged the old one.
            // Decide on the new status now, as had it come after the refusal, rather than
            // after the refusal's backoff.
            self.status_changed_under(myself, &key);
        }
    }

    /// The API server throttled `pod`'s call: every eviction pauses, and fewer go out at once
    /// after the pause; the request goes first when the pause ends.
    fn throttled(
        &mut self,
        pod: PodRef,
        retry_after: Option<Duration>,
        held: Option<Box<Held>>,
        span: &tracing::Span,
    ) {
        self.tally.throttled();
        let pause = self.throttle_pause(retry_after);
        let delay = self.throttle.throttled(Instant::now(), pause);
        if let Some(delay) = delay {
            // A new pause: fewer calls out at once after it (`concurrency`).
            self.concurrency.throttled();
            span.record("nmo.backoff_ms", duration_ms(delay));
        }
        let (limit, ceiling) = (self.concurrency.limit(), self.concurrency.ceiling());
        span.in_scope(|| {
            tracing::info!(
                in_flight_limit = limit,
                in_flight_ceiling = ceiling,
                "throttled by the API server, pausing every eviction"
            )
        });
        if let Some(mut h) = held {
            h.move_to(Where::Ready);
            self.requests.held_again(h);
            self.requests.queue_first(pod);
        }
    }

    /// `pod`'s request ends with `reply` (final, no eviction).
    fn ended(&mut self, pod: &PodRef, held: Option<Box<Held>>, reply: EvictionReply) {
        if let Some(h) = held {
            h.reply(reply);
        }
        self.forget(pod);
    }

    /// `pod`'s request ended without an eviction: unless it was asked again meanwhile, its
    /// PDB gate need not remember it.
    fn forget(&mut self, pod: &PodRef) {
        if self.requests.holds(pod) {
            return;
        }
        if let Some(key) = self.gates.forget(pod) {
            self.timers.cancel(&Wake::GateOpen(key));
        }
    }
}
