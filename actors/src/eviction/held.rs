//! A request the eviction actor holds, and where it is.

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
    pub(super) req: EvictionRequest,
    pub(super) at: Where,
    /// Eviction calls made for this request so far.
    pub(super) attempts: u32,
    /// The span of the call in flight: its outcome is recorded when the call returns.
    pub(super) attempt_span: Option<tracing::Span>,
    /// Arrival order: pods released together go oldest first.
    pub(super) seq: u64,
    /// The PDB watch's change count when the last call was sent: a refusal of a PDB
    /// whose status changed since was answered on a status already replaced.
    pub(super) sent_at_change: u64,
    /// Who may act on the request besides the budget (see [`crate::interception`]).
    pub(super) interception: Interception,
    /// Refusals in a row of an intercepted request (its re-ask backoff).
    pub(super) refusals: u32,
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
