//! What the actors report about themselves, for metrics and trace plumbing. The actors only
//! say what happened; the process decides what to make of it (Prometheus metrics, trace ids in
//! logs), so no metrics library reaches the maintenance logic.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::model::Phase;

/// The result of one eviction request, as counted by the eviction actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EvictionResult {
    /// The API accepted the eviction (201).
    Evicted,
    /// The pod was already gone (404).
    NotFound,
    /// Refused by a PodDisruptionBudget (429 with a budget cause).
    BlockedByPdb,
    /// Refused by API throttling (429 without a budget cause).
    Throttled,
    /// More than one budget matches the pod (500).
    TooManyPdbs,
    /// The pod's namespace is terminating (403).
    NamespaceTerminating,
    /// The call failed otherwise.
    Error,
    /// Never sent: the eviction queue was full.
    QueueFull,
    /// Refused by an admission webhook on `pods/eviction` (which acts on the request).
    DeniedByWebhook,
}

impl EvictionResult {
    /// The label value (`snake_case`).
    pub fn as_str(self) -> &'static str {
        match self {
            EvictionResult::Evicted => "evicted",
            EvictionResult::NotFound => "not_found",
            EvictionResult::BlockedByPdb => "blocked_by_pdb",
            EvictionResult::Throttled => "throttled",
            EvictionResult::TooManyPdbs => "too_many_pdbs",
            EvictionResult::NamespaceTerminating => "namespace_terminating",
            EvictionResult::Error => "error",
            EvictionResult::QueueFull => "queue_full",
            EvictionResult::DeniedByWebhook => "denied_by_webhook",
        }
    }
}

/// A node lease operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaseOp {
    /// Taking the lease when maintenance starts (or after a repair).
    Acquire,
    /// The periodic renewal.
    Renew,
    /// Deleting our lease when maintenance ends.
    Release,
}

impl LeaseOp {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseOp::Acquire => "acquire",
            LeaseOp::Renew => "renew",
            LeaseOp::Release => "release",
        }
    }
}

/// How a lease operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaseResult {
    /// Done.
    Ok,
    /// Someone else holds a valid lease (or, on release, the lease is not ours: left alone).
    HeldByOther,
    /// Optimistic concurrency kept failing.
    Conflict,
    /// The API call failed.
    Error,
}

impl LeaseResult {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseResult::Ok => "ok",
            LeaseResult::HeldByOther => "held_by_other",
            LeaseResult::Conflict => "conflict",
            LeaseResult::Error => "error",
        }
    }
}

/// How a node actor's operation (a start-up or repair pass, a drain pass, an undo) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpOutcome {
    /// It did what it set out to do (a drain pass may leave pods for the next one).
    Success,
    /// It failed (a call failed or was refused); the actor retries with backoff.
    Error,
    /// The actor stopped before the result came back.
    Abandoned,
}

/// Where the spans that only give log lines their context go (a maintenance's node and trace
/// id once its trace has ended): the process keeps them out of its traces.
pub const LOGS_ONLY_TARGET: &str = "nmo_actors::logs_only";

/// The ids of a trace's root span, kept so that traces which follow it can link back after it
/// has ended (a link needs only the ids, not the span).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceAnchor {
    /// The trace id, 32 hex digits.
    pub trace_id: String,
    /// The root span's id, 16 hex digits.
    pub span_id: String,
    /// Whether the trace is sampled.
    pub sampled: bool,
}

/// Receives what the actors report. Every method defaults to doing nothing; calls are made from
/// actor handlers and must return quickly (no I/O).
pub trait Observer: Send + Sync + 'static {
    /// A new trace root was opened: `maintenance` (a NodeMaintenance's maintenance) or
    /// `end_maintenance` (its undo). The process may record a `trace_id` field on it, which
    /// every log line inside the maintenance then carries.
    fn trace_root(&self, _span: &tracing::Span) {}

    /// The ids of the trace root `span`, for later traces to link to (None: not traced).
    fn trace_anchor(&self, _span: &tracing::Span) -> Option<TraceAnchor> {
        None
    }

    /// Links the new trace root `span` to the trace `to` (the maintenance it follows).
    fn link(&self, _span: &tracing::Span, _to: &TraceAnchor) {}

    /// One eviction request was answered (or refused by the queue).
    fn eviction(&self, _result: EvictionResult) {}

    /// An eviction request was taken into the eviction actor's queue (not one already held for
    /// the same pod, nor one refused because the queue is full).
    fn eviction_queued(&self) {}

    /// The supervisor handled a message of the NodeMaintenance watch (a change, a deletion, the
    /// end of a listing).
    fn watch_event_handled(&self) {}

    /// A node actor started an operation (its one at a time: a start-up or repair pass, a drain
    /// pass, an undo).
    fn operation_started(&self) {}

    /// That operation ended, `took` after it started.
    fn operation_finished(&self, _took: Duration, _outcome: OpOutcome) {}

    /// The eviction actor's requests waiting (queued or parked behind a budget) and in flight.
    fn eviction_queue(&self, _waiting: usize, _in_flight: usize) {}

    /// A maintenance driven by this process changed phase: `from` None = newly driven, `to`
    /// None = no longer driven (undone, gone, or its actor stopped).
    fn maintenance_phase(&self, _from: Option<Phase>, _to: Option<Phase>) {}

    /// A maintenance driven by this process is Running (`started`: when it was asked for, the
    /// NodeMaintenance's creation time), or is no longer (`started` None: it succeeded, failed,
    /// is being undone, or this process stopped driving it).
    fn maintenance_running(
        &self,
        _maintenance: &str,
        _node: &str,
        _started: Option<chrono::DateTime<chrono::Utc>>,
    ) {
    }

    /// A drain finished (every evictable pod gone) after `took` since it began in this process.
    fn drain_finished(&self, _took: Duration) {}

    /// A drain pass began: a classification of every pod of a node, with the API calls it
    /// needs (DaemonSet lookups, deletions). Pod changes and retry ticks that need no call are
    /// taken in without one.
    fn drain_pass(&self) {}

    /// A lease operation ended.
    fn lease_operation(&self, _op: LeaseOp, _result: LeaseResult) {}

    /// API reads were made to explain why a budget blocks a drain.
    fn diagnosis_reads(&self, _reads: u32) {}

    /// The drain of `maintenance` (on `node`) is blocked: `Some` with the blocker's class
    /// (`CrossNodeDeadlock`, ...) and since when, `None` when it is not (any more).
    fn drain_blocked(
        &self,
        _maintenance: &str,
        _node: &str,
        _blocked: Option<(&'static str, DateTime<Utc>)>,
    ) {
    }
}

/// The observer that ignores everything (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopObserver;

impl Observer for NoopObserver {}

/// The phase of one maintenance as reported to an observer. Dropping it withdraws the phase, so
/// an actor that ends any way at all (panic included: its state is dropped) is not counted on.
pub(crate) struct PhaseReport {
    observer: Arc<dyn Observer>,
    phase: Option<Phase>,
    /// Which maintenance, for [`Observer::maintenance_running`] (None: not reported).
    identity: Option<MaintenanceIdentity>,
}

/// A maintenance as [`Observer::maintenance_running`] names it.
pub(crate) struct MaintenanceIdentity {
    pub(crate) name: String,
    pub(crate) node: String,
    pub(crate) created: chrono::DateTime<chrono::Utc>,
}

impl PhaseReport {
    pub(crate) fn new(observer: Arc<dyn Observer>) -> Self {
        PhaseReport {
            observer,
            phase: None,
            identity: None,
        }
    }

    /// Also reports when the maintenance is Running and when it stops being so.
    pub(crate) fn naming(mut self, identity: MaintenanceIdentity) -> Self {
        self.identity = Some(identity);
        self
    }

    /// Reports a change to `to`; returns whether it was one.
    pub(crate) fn set(&mut self, to: Option<Phase>) -> bool {
        if to == self.phase {
            return false;
        }
        self.observer.maintenance_phase(self.phase, to);
        let running = |phase: Option<Phase>| phase == Some(Phase::Running);
        if let Some(id) = &self.identity
            && running(self.phase) != running(to)
        {
            let started = running(to).then_some(id.created);
            self.observer
                .maintenance_running(&id.name, &id.node, started);
        }
        self.phase = to;
        true
    }
}

impl Drop for PhaseReport {
    fn drop(&mut self) {
        self.set(None);
    }
}

/// Whether one maintenance's drain is blocked, as reported to an observer. Dropping it
/// withdraws the report, so a drain that ends any way at all is not shown blocked forever.
pub(crate) struct BlockedReport {
    observer: Arc<dyn Observer>,
    maintenance: String,
    node: String,
    reported: Option<(&'static str, DateTime<Utc>)>,
}

impl BlockedReport {
    pub(crate) fn new(observer: Arc<dyn Observer>, maintenance: String, node: String) -> Self {
        BlockedReport {
            observer,
            maintenance,
            node,
            reported: None,
        }
    }

    /// Reports `blocked` (None: not blocked) if it differs from the last report.
    pub(crate) fn set(&mut self, blocked: Option<(&'static str, DateTime<Utc>)>) {
        if blocked == self.reported {
            return;
        }
        self.observer
            .drain_blocked(&self.maintenance, &self.node, blocked);
        self.reported = blocked;
    }
}

impl Drop for BlockedReport {
    fn drop(&mut self) {
        self.set(None);
    }
}

/// The default observer handle.
pub fn noop() -> Arc<dyn Observer> {
    Arc::new(NoopObserver)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use chrono::{TimeZone, Utc};

    use super::*;

    /// Records the `maintenance_running` reports.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<(String, Option<chrono::DateTime<Utc>>)>>);

    impl Observer for Recorder {
        fn maintenance_running(
            &self,
            maintenance: &str,
            _node: &str,
            started: Option<chrono::DateTime<Utc>>,
        ) {
            self.0
                .lock()
                .unwrap()
                .push((maintenance.to_string(), started));
        }
    }

    #[test]
    fn running_is_reported_with_the_creation_time_and_withdrawn_on_drop() {
        let recorder = Arc::new(Recorder::default());
        let created = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        let mut report = PhaseReport::new(recorder.clone()).naming(MaintenanceIdentity {
            name: "nm".into(),
            node: "n1".into(),
            created,
        });
        report.set(Some(Phase::Running));
        report.set(Some(Phase::Running));
        report.set(Some(Phase::Succeeded));
        report.set(Some(Phase::Running));
        drop(report);
        let seen = recorder.0.lock().unwrap().clone();
        let nm = |started| ("nm".to_string(), started);
        assert_eq!(
            seen,
            [nm(Some(created)), nm(None), nm(Some(created)), nm(None)]
        );
    }
}
