//! A request the eviction actor holds, and where it is. Its fields are private: each flow
//! (the queue, the answers, the budgets, the interceptors) moves it through a method named
//! after what happened.

use super::messages::{EvictionReply, EvictionReport, EvictionRequest};
use crate::interception::Interception;

/// Where a held request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Where {
    /// In the queue, sent when the rate limit allows.
    Ready,
    /// Behind a PDB's 429 backoff (the fallback).
    Parked,
    /// Waiting for its PDB's watched status to allow it.
    Waiting,
    /// The call is out.
    InFlight,
}

pub(super) struct Held {
    req: EvictionRequest,
    at: Where,
    /// Eviction calls made for this request so far.
    attempts: u32,
    /// The span of the call in flight: its outcome is recorded when the call returns.
    attempt_span: Option<tracing::Span>,
    /// Arrival order: pods released together go oldest first.
    seq: u64,
    /// The PDB watch's change count when the last call was sent: a refusal of a PDB
    /// whose status changed since was answered on a status already replaced.
    sent_at_change: u64,
    /// Who may act on the request besides the budget (see [`crate::interception`]).
    interception: Interception,
    /// Refusals in a row of an intercepted request (its re-ask backoff).
    refusals: u32,
    /// The last `Blocked` told to the asker (not repeated while it says the same).
    told: Option<EvictionReply>,
}

impl Held {
    pub(super) fn new(req: EvictionRequest, at: Where) -> Self {
        Held {
            req,
            at,
            attempts: 0,
            attempt_span: None,
            seq: 0,
            sent_at_change: 0,
            interception: Interception::None,
            refusals: 0,
            told: None,
        }
    }

    /// The request as asked.
    pub(super) fn req(&self) -> &EvictionRequest {
        &self.req
    }

    /// Where it is.
    pub(super) fn at(&self) -> Where {
        self.at
    }

    /// Whether it waits (for its budget, or behind a closed gate), not queued nor out.
    pub(super) fn is_waiting(&self) -> bool {
        matches!(self.at, Where::Waiting | Where::Parked)
    }

    /// It moves to `at` (for [`Where::InFlight`], see [`Self::sent`]).
    pub(super) fn move_to(&mut self, at: Where) {
        self.at = at;
    }

    /// Eviction calls made for it so far.
    pub(super) fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Its place in arrival order.
    pub(super) fn seq(&self) -> u64 {
        self.seq
    }

    /// It arrived `seq`-th.
    pub(super) fn numbered(&mut self, seq: u64) {
        self.seq = seq;
    }

    /// Its call goes out, the PDB watch at change `change`.
    pub(super) fn sent(&mut self, change: u64) {
        self.at = Where::InFlight;
        self.attempts = self.attempts.saturating_add(1);
        self.sent_at_change = change;
    }

    /// The PDB watch's change count when its last call went out.
    pub(super) fn sent_at_change(&self) -> u64 {
        self.sent_at_change
    }

    /// The span of its call in flight.
    pub(super) fn attempt_span(&self) -> Option<&tracing::Span> {
        self.attempt_span.as_ref()
    }

    /// Its call in flight is traced by `span`.
    pub(super) fn trace_attempt(&mut self, span: tracing::Span) {
        self.attempt_span = Some(span);
    }

    /// Takes out its call's span (which ends once its last handle is gone).
    pub(super) fn take_attempt_span(&mut self) -> Option<tracing::Span> {
        self.attempt_span.take()
    }

    /// The same pod asked again: the newest reply address is kept.
    pub(super) fn answer_to(&mut self, reply_to: ractor::DerivedActorRef<EvictionReport>) {
        self.req.reply_to = reply_to;
    }

    /// Who may act on it besides its budget.
    pub(super) fn interception(&self) -> &Interception {
        &self.interception
    }

    /// Who may act on it, as the interceptors now know; true when it is newly intercepted.
    pub(super) fn intercepted_as(&mut self, interception: Interception) -> bool {
        let newly = interception.is_intercepted() && !self.interception.is_intercepted();
        self.interception = interception;
        newly
    }

    /// A webhook refused it: it is intercepted, whatever the webhook list said (it may not be
    /// known yet, or not readable): the webhook's refusal is proof enough.
    pub(super) fn intercepted_by_webhook(&mut self, webhook: &str) {
        if self.interception.is_intercepted() {
            return;
        }
        self.interception = Interception::Intercepted {
            webhooks: vec![webhook.to_string()],
            launcher: false,
        };
    }

    /// An intercepted request was refused: it waits for its re-ask. Returns its refusals in
    /// a row (the re-ask's backoff).
    pub(super) fn refused_while_intercepted(&mut self) -> u32 {
        self.refusals = self.refusals.saturating_add(1);
        self.at = Where::Waiting;
        self.refusals
    }

    /// Tells the asker it is blocked, unless it was told exactly that already. The blocker is
    /// rendered as the asker's maintenance sees it.
    pub(super) fn tell_blocked(&mut self, reply: EvictionReply) {
        let reply = match reply {
            EvictionReply::Blocked {
                pdb,
                message,
                blocker,
            } => EvictionReply::Blocked {
                pdb,
                message,
                blocker: blocker.map(|b| b.seen_by(&self.req.maintenance)),
            },
            other => other,
        };
        if self.told.as_ref() == Some(&reply) {
            return;
        }
        self.reply(reply.clone());
        self.told = Some(reply);
    }

    /// Tells the asker; it may be gone (maintenance deleted): nothing to tell then.
    pub(super) fn reply(&self, reply: EvictionReply) {
        let report = EvictionReport {
            pod: self.req.pod.clone(),
            uid: self.req.uid.clone(),
            reply,
        };
        let _ = self.req.reply_to.cast(report);
    }
}
