//! The eviction actor's answers: what each eviction call's outcome does to the asker (done,
//! blocked, refused, failed), to the PDB's gate and bookkeeping, and to the throttle.

use std::time::Duration;

use ractor::ActorRef;
use tokio::time::Instant;

use super::EvictionState;
use super::gate::Accepted;
use super::held::Where;
use super::intercepted::intercepted_by_webhook;
use super::messages::{EvictionMsg, EvictionReply};
use super::outcome;
use crate::model::{PodRef, Uid};
use crate::ports::{ClusterError, EvictionOutcome};

fn duration_ms(delay: Duration) -> u64 {
    u64::try_from(delay.as_millis()).unwrap_or(u64::MAX)
}

impl EvictionState {
    /// `pod` is evicted or gone: the PDB that refused it before accepts again.
    fn pdb_accepted(&mut self, myself: &ActorRef<EvictionMsg>, pod: &PodRef) {
        match self.gates.accepted(pod) {
            Accepted::NoGate => {}
            Accepted::Released(key) => {
                self.gate_timers.remove(&key);
            }
            Accepted::Reopened(key) => {
                if let Some(timer) = self.gate_timers.get_mut(&key) {
                    timer.clear();
                }
                self.open_gate(myself, &key);
            }
        }
    }

    /// The answer to `pod`'s eviction call: reply to its asker, and update the PDB's
    /// bookkeeping, the gates and the throttle by what the answer says.
    pub(super) fn done(
        &mut self,
        myself: &ActorRef<EvictionMsg>,
        pod: PodRef,
        uid: &Uid,
        result: Result<EvictionOutcome, ClusterError>,
    ) {
        self.in_flight = self.in_flight.saturating_sub(1);
        // Only the request whose call this was: one cancelled or withdrawn while its call was
        // out may have been made again meanwhile (for another pod of that name, too), and that
        // one waits for a call of its own.
        let mut held = match self.held.get(&pod) {
            Some(h) if h.at == Where::InFlight && h.req.uid == *uid => self.held.remove(&pod),
            _ => None,
        };
        let (counted, status) = outcome::classify(&result);
        self.config.observer.eviction(counted);
        // The attempt's span ends once the last handle is gone: take ours out of the request.
        let span = held
            .as_mut()
            .and_then(|h| h.attempt_span.take())
            .unwrap_or_else(tracing::Span::none);
        span.record("nmo.outcome", counted.as_str());
        if let Some(status) = status {
            span.record("http.response.status_code", status);
        }
        let now = Instant::now();
        match &result {
            Ok(EvictionOutcome::Evicted) => self.pdbs.answered(&pod, true, now),
            // Throttled: not answered, the pod keeps its place; a 429 of its PDB is handled
            // below; anything else did not count against the PDB.
            Ok(EvictionOutcome::Throttled { .. } | EvictionOutcome::BlockedByPdb { .. }) => {}
            // The call may or may not have reached the API: counted until the TTL.
            Err(_) => self.pdbs.answered(&pod, true, now),
            Ok(_) => self.pdbs.answered(&pod, false, now),
        }
        if matches!(&result, Ok(EvictionOutcome::Evicted) | Err(_)) {
            self.schedule_expiry(myself);
        }
        match result {
            Ok(EvictionOutcome::Evicted | EvictionOutcome::NotFound) => {
                self.pdb_accepted(myself, &pod);
                // Through API Priority and Fairness: the pause and the cap recover a little.
                self.throttle.passed(self.concurrency.ceiling());
                self.concurrency.passed();
                if let Some(h) = held {
                    h.reply(EvictionReply::Done);
                }
            }
            Ok(EvictionOutcome::BlockedByPdb { pdb, message, .. })
                if held
                    .as_ref()
                    .is_some_and(|h| h.interception.is_intercepted()) =>
            {
                // Refused by the budget after the webhooks let the request through (KubeVirt
                // marks the VM for migration and lets its budget answer): asked again with
                // the interceptors' backoff, not the budget's.
                self.stats.blocked += 1;
                self.pdbs.refused(&pod);
                if let Some(name) = &pdb {
                    span.record("nmo.pdb", name.as_str());
                }
                span.in_scope(|| tracing::info!(refusal = %message, "intercepted eviction refused by its budget, asking again"));
                if let Some(h) = held {
                    self.intercepted_refusal(myself, h, pdb, message);
                }
            }
            Ok(EvictionOutcome::DeniedByWebhook {
                webhook, message, ..
            }) => {
                span.in_scope(|| tracing::info!(%webhook, refusal = %message, "eviction refused by an admission webhook, asking again"));
                if let Some(mut h) = held {
                    intercepted_by_webhook(&mut h, &webhook);
                    self.intercepted_refusal(myself, h, None, message);
                }
            }
            Ok(EvictionOutcome::BlockedByPdb {
                pdb,
                message,
                retry_after,
            }) => {
                self.stats.blocked += 1;
                // Refused although the watched status allowed: the status is behind, the
                // PDB takes the 429 path until its status changes.
                self.pdbs.refused(&pod);
                let backoff = self.backoff(retry_after);
                let (key, delay) =
                    self.gates
                        .refused(&pod, pdb.as_deref(), Instant::now(), backoff);
                if let Some(delay) = delay {
                    let gate = key.clone();
                    self.gate_timers
                        .entry(key.clone())
                        .or_default()
                        .set(myself.send_after(delay, move || EvictionMsg::GateOpen(gate)));
                }
                if let Some(name) = &pdb {
                    span.record("nmo.pdb", name.as_str());
                }
                if let Some(delay) = delay {
                    span.record("nmo.backoff_ms", duration_ms(delay));
                }
                span.in_scope(|| tracing::info!(refusal = %message, "blocked by a PodDisruptionBudget, waiting for its backoff"));
                if let Some(mut h) = held {
                    let blocker = self.blocker_for(&key);
                    h.tell_blocked(EvictionReply::Blocked {
                        pdb,
                        message,
                        blocker,
                    });
                    let sent_at_change = h.sent_at_change;
                    h.at = Where::Parked;
                    self.gates.park(&key, pod.clone());
                    self.held.insert(pod, h);
                    self.note_blocked(myself, &key);
                    if self.pdbs.changed_since(&key, sent_at_change) {
                        // The PDB's status changed while the call was out (a real API
                        // server's controller writes it a moment after the spec changed): the
                        // refusal judged the old one. Decide on the new status now, as had it
                        // come after the refusal, rather than after the refusal's backoff.
                        self.status_changed_under(myself, &key);
                    }
                }
            }
            Ok(EvictionOutcome::Throttled { retry_after }) => {
                self.stats.throttled += 1;
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
                    h.at = Where::Ready;
                    self.held.insert(pod.clone(), h);
                    self.ready.push_front(pod);
                }
            }
            Ok(EvictionOutcome::TooManyPdbs { message }) => {
                if let Some(h) = held {
                    h.reply(EvictionReply::TooManyPdbs { message });
                }
                self.forget(&pod);
            }
            Ok(EvictionOutcome::NamespaceTerminating) => {
                if let Some(h) = held {
                    h.reply(EvictionReply::NamespaceTerminating);
                }
                self.forget(&pod);
            }
            Err(err) => {
                span.record("otel.status_code", "ERROR");
                span.in_scope(|| tracing::warn!(error = %err, "eviction failed"));
                if let Some(h) = held {
                    h.reply(EvictionReply::Failed(err.to_string()));
                }
                self.forget(&pod);
            }
        }
        self.pump(myself);
    }

    /// `pod`'s request ended without an eviction: unless it was asked again meanwhile, its
    /// PDB gate need not remember it.
    fn forget(&mut self, pod: &PodRef) {
        if self.held.contains_key(pod) {
            return;
        }
        if let Some(key) = self.gates.forget(pod) {
            self.gate_timers.remove(&key);
        }
    }
}
