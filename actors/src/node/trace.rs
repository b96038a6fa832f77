//! The traces of one maintenance.
//!
//! The `maintenance` root covers the maintenance from its start until it is Succeeded or
//! Failed, and then ends, so that Jaeger never shows a trace whose root is missing for the days
//! a node may stay in maintenance. What follows is traced apart, each piece linked back to the
//! maintenance: every later piece of work (a lease renewal, a repair of the node, a status
//! write) as a short `guard_maintenance` trace of its own, and the deletion's undo as one
//! `end_maintenance` trace. Log lines keep their context throughout: once the root has ended
//! they are written in a span that only logs see ([`LOGS_ONLY_TARGET`]), with the same node and
//! trace id.

use tracing::Level;

use super::ops::OpCtx;
use crate::model::Phase;
use crate::observe::{LOGS_ONLY_TARGET, TraceAnchor};

/// Where the maintenance's trace stands, and the span log lines go to: only this file changes
/// them.
#[derive(Debug)]
pub(super) struct TraceState {
    /// The span log lines go to and work hangs under (see [`Self::work_span`]): the
    /// `maintenance` root until Succeeded or Failed, then a logs-only span, and
    /// `end_maintenance` once the deletion is seen.
    current: tracing::Span,
    /// The ids of the current `maintenance` root (None without tracing).
    anchor: Option<TraceAnchor>,
    /// The `maintenance` root has ended: work gets roots of its own.
    ended: bool,
}

impl TraceState {
    /// The state of a maintenance whose `maintenance` root is `root`, with ids `anchor`.
    pub(super) fn started(root: tracing::Span, anchor: Option<TraceAnchor>) -> Self {
        TraceState {
            current: root,
            anchor,
            ended: false,
        }
    }

    /// The span log lines are written in (entered, not `parent:`: JSON logs list the spans
    /// entered, so that is how a line gets the maintenance's node and trace id).
    pub(super) fn span(&self) -> &tracing::Span {
        &self.current
    }

    /// Says the maintenance's phase on the span log lines go to.
    pub(super) fn record_phase(&self, phase: Phase) {
        self.current.record("nmo.phase", phase.as_str());
    }
}

/// The most of a NodeMaintenance's reason its spans (and so every log line in them) carry.
const SHOWN_REASON: usize = 256;
/// The most of a node's name they carry (a valid one is at most 253 characters).
const SHOWN_NODE_NAME: usize = 253;

/// The `maintenance` trace root of NodeMaintenance `name` on `node`.
pub(super) fn maintenance_root(name: &str, node: &str, reason: &str) -> tracing::Span {
    let node = crate::model::bounded(node, SHOWN_NODE_NAME);
    let reason = crate::model::bounded(reason, SHOWN_REASON);
    // A trace root of its own (never a child of whatever span the spawn happened in).
    tracing::info_span!(
        parent: None,
        "maintenance",
        nmo.maintenance = %name,
        k8s.node.name = %node,
        nmo.reason = %reason,
        nmo.phase = tracing::field::Empty,
        trace_id = tracing::field::Empty,
    )
}

impl TraceState {
    /// The span the next piece of work hangs under: the current trace root while it is
    /// open (`maintenance`, or `end_maintenance` once deleted); after the maintenance's root
    /// has ended, a new `guard_maintenance` root linked to it.
    pub(super) fn work_span(&self, ctx: &OpCtx) -> tracing::Span {
        if !self.ended {
            return self.current.clone();
        }
        let span = tracing::info_span!(
            parent: None,
            "guard_maintenance",
            nmo.maintenance = %ctx.nm_name,
            k8s.node.name = %ctx.node_name,
            trace_id = tracing::field::Empty,
        );
        self.linked_root(&span, ctx);
        span
    }

    /// Follows a phase change, replacing the span log lines and work hang under:
    /// Succeeded or Failed ends the `maintenance` root; Running again (a failed maintenance
    /// started anew, with `reason`) opens a new one, linked to the old.
    pub(super) fn on_phase(&mut self, phase: Phase, ctx: &OpCtx, reason: &str) {
        match phase {
            Phase::Succeeded | Phase::Failed if !self.ended => {
                // The root says how the maintenance ended, whichever of the status write and
                // the phase bookkeeping came first.
                self.current.record("nmo.phase", phase.as_str());
                // Log lines keep the maintenance's node and trace id, in a span no trace gets.
                let logs = tracing::span!(
                    target: LOGS_ONLY_TARGET,
                    parent: None,
                    Level::INFO,
                    "maintenance",
                    nmo.maintenance = %ctx.nm_name,
                    k8s.node.name = %ctx.node_name,
                    nmo.phase = phase.as_str(),
                    trace_id = tracing::field::Empty,
                );
                if let Some(anchor) = &self.anchor {
                    logs.record("trace_id", anchor.trace_id.as_str());
                }
                // Dropping the root's handle ends it once its last child has ended.
                self.current = logs;
                self.ended = true;
            }
            Phase::Running if self.ended => {
                let root = maintenance_root(&ctx.nm_name, &ctx.node_name, reason);
                self.linked_root(&root, ctx);
                let anchor = ctx.config.observer.trace_anchor(&root);
                *self = TraceState::started(root, anchor);
            }
            _ => {}
        }
    }

    /// Moves to the `end_maintenance` root the deletion's undo runs in, linked to the
    /// maintenance; the maintenance's root span ends here if it had not yet (once its last
    /// children do).
    pub(super) fn end(&mut self, ctx: &OpCtx) {
        let end = tracing::info_span!(
            parent: None,
            "end_maintenance",
            nmo.maintenance = %ctx.nm_name,
            k8s.node.name = %ctx.node_name,
            trace_id = tracing::field::Empty,
        );
        self.linked_root(&end, ctx);
        // The undo's work hangs under this root until the actor stops.
        self.ended = false;
        self.current = end;
    }

    /// Tells the observer about a new root that follows the maintenance.
    fn linked_root(&self, span: &tracing::Span, ctx: &OpCtx) {
        let observer = &ctx.config.observer;
        observer.trace_root(span);
        if let Some(anchor) = &self.anchor {
            observer.link(span, anchor);
        }
    }
}
