//! A request the eviction actor holds, and where it is.

use super::messages::{EvictionReply, EvictionReport, EvictionRequest};

/// Where a held request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Where {
    /// In the queue, sent when the rate limit allows.
    Ready,
    /// Behind a closed budget gate.
    Parked,
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
}

impl Held {
    pub(super) fn new(req: EvictionRequest, at: Where) -> Self {
        Held {
            req,
            at,
            attempts: 0,
            attempt_span: None,
        }
    }

    /// Tells the asker; it may be gone (maintenance deleted): nothing to tell then.
    pub(super) fn reply(&self, reply: EvictionReply) {
        let report = EvictionReport {
            pod: self.req.pod.clone(),
            reply,
        };
        let _ = self.req.reply_to.cast(report);
    }
}
