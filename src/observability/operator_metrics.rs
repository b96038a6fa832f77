//! The operator's Prometheus metrics, fed by what the actors report through their
//! [`Observer`] port (so no metrics library reaches the maintenance logic).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use nmo_actors::model::Phase;
use nmo_actors::observe::{EvictionResult, LeaseOp, LeaseResult, Observer, OpOutcome, TraceAnchor};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::controller_metrics::{ControllerMetrics, EVICTION_QUEUE};
use super::drain_metrics::DrainMetrics;
use super::telemetry;

/// Label of `nmo_evictions_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EvictionLabels {
    result: &'static str,
}

/// Label of `nmo_maintenances`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: &'static str,
}

/// Labels of `nmo_lease_operations_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabels {
    operation: &'static str,
    result: &'static str,
}

/// Labels of `nmo_maintenance_start_time_seconds`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MaintenanceLabels {
    nodemaintenance: String,
    node: String,
}

/// Every maintenance metric; cheap to clone (the metrics are shared).
#[derive(Debug, Clone)]
pub struct OperatorMetrics {
    evictions: Family<EvictionLabels, Counter>,
    maintenances: Family<PhaseLabels, Gauge>,
    drain_duration: Histogram,
    drain_passes: Counter,
    queue_depth: Gauge,
    in_flight: Gauge,
    lease_operations: Family<LeaseLabels, Counter<u64, AtomicU64>>,
    drain: DrainMetrics,
    maintenance_start: Family<MaintenanceLabels, Gauge>,
    controller: ControllerMetrics,
}

impl Default for OperatorMetrics {
    fn default() -> Self {
        OperatorMetrics {
            evictions: Family::default(),
            maintenances: Family::default(),
            // 1 s .. about 4.5 h: a drain takes seconds without budgets, hours behind a tight one.
            drain_duration: Histogram::new(exponential_buckets(1.0, 2.0, 15)),
            drain_passes: Counter::default(),
            queue_depth: Gauge::default(),
            in_flight: Gauge::default(),
            lease_operations: Family::default(),
            drain: DrainMetrics::default(),
            maintenance_start: Family::default(),
            controller: ControllerMetrics::default(),
        }
    }
}

impl OperatorMetrics {
    /// Registers every metric in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "nmo_evictions",
            "Eviction requests answered, by result (evicted, not_found, blocked_by_pdb, throttled, too_many_pdbs, namespace_terminating, error, queue_full)",
            self.evictions.clone(),
        );
        registry.register(
            "nmo_maintenances",
            "NodeMaintenances driven by this process, by phase",
            self.maintenances.clone(),
        );
        registry.register(
            "nmo_drain_duration_seconds",
            "Time from the start of a drain to no evictable pod left",
            self.drain_duration.clone(),
        );
        registry.register(
            "nmo_drain_passes",
            "Drain passes run: classifications of every pod of a node, with the calls they need (pod changes and retry ticks that need none are taken in without a pass)",
            self.drain_passes.clone(),
        );
        registry.register(
            "nmo_eviction_queue_depth",
            "Eviction requests waiting: queued, or parked behind a PodDisruptionBudget's backoff",
            self.queue_depth.clone(),
        );
        registry.register(
            "nmo_evictions_in_flight",
            "Eviction calls in flight",
            self.in_flight.clone(),
        );
        registry.register(
            "nmo_lease_operations",
            "Node lease operations (acquire, renew, release), by result",
            self.lease_operations.clone(),
        );
        self.drain.register(registry);
        self.controller.register(registry);
        registry.register(
            "nmo_maintenance_start_time_seconds",
            "For each Running NodeMaintenance this process drives, when it was created (unix time): `time() - nmo_maintenance_start_time_seconds > 3600` is a maintenance unfinished after an hour",
            self.maintenance_start.clone(),
        );
    }

    /// controller-runtime's families (reconciles, workers, work queues).
    pub fn controller(&self) -> &ControllerMetrics {
        &self.controller
    }

    fn phase(&self, phase: Phase) -> Gauge {
        self.maintenances
            .get_or_create(&PhaseLabels {
                phase: phase.as_str(),
            })
            .clone()
    }
}

fn gauge_value(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The process's [`Observer`]: Prometheus metrics, and a `trace_id` on every trace root so that
/// log lines inside a maintenance name their trace.
#[derive(Debug, Clone, Default)]
pub struct ProcessObserver {
    metrics: OperatorMetrics,
}

impl ProcessObserver {
    /// An observer feeding `metrics`.
    pub fn new(metrics: OperatorMetrics) -> Self {
        ProcessObserver { metrics }
    }

    /// As the actors' configuration wants it.
    pub fn shared(self) -> Arc<dyn Observer> {
        Arc::new(self)
    }
}

impl Observer for ProcessObserver {
    fn trace_root(&self, span: &tracing::Span) {
        telemetry::record_trace_id(span);
    }

    fn trace_anchor(&self, span: &tracing::Span) -> Option<TraceAnchor> {
        telemetry::trace_anchor(span)
    }

    fn link(&self, span: &tracing::Span, to: &TraceAnchor) {
        telemetry::link(span, to);
    }

    fn eviction(&self, result: EvictionResult) {
        self.metrics
            .evictions
            .get_or_create(&EvictionLabels {
                result: result.as_str(),
            })
            .inc();
    }

    fn eviction_queue(&self, waiting: usize, in_flight: usize) {
        self.metrics.queue_depth.set(gauge_value(waiting));
        self.metrics.in_flight.set(gauge_value(in_flight));
        self.metrics.controller.eviction_depth(waiting);
    }

    fn eviction_queued(&self) {
        self.metrics.controller.added(EVICTION_QUEUE);
    }

    fn watch_event_handled(&self) {
        self.metrics.controller.watch_event_handled();
    }

    fn operation_started(&self) {
        self.metrics.controller.started();
    }

    fn operation_finished(&self, took: Duration, outcome: OpOutcome) {
        let failed = match outcome {
            OpOutcome::Success => Some(false),
            OpOutcome::Error => Some(true),
            OpOutcome::Abandoned => None,
        };
        self.metrics.controller.finished(took, failed);
    }

    fn maintenance_phase(&self, from: Option<Phase>, to: Option<Phase>) {
        // A node actor starts reporting with its first phase and stops when it ends.
        match (from, to) {
            (None, Some(_)) => self.metrics.controller.workers_changed(1),
            (Some(_), None) => self.metrics.controller.workers_changed(-1),
            _ => {}
        }
        if let Some(from) = from {
            self.metrics.phase(from).dec();
        }
        if let Some(to) = to {
            self.metrics.phase(to).inc();
        }
    }

    fn maintenance_running(
        &self,
        maintenance: &str,
        node: &str,
        started: Option<chrono::DateTime<chrono::Utc>>,
    ) {
        let labels = MaintenanceLabels {
            nodemaintenance: maintenance.to_string(),
            node: node.to_string(),
        };
        match started {
            Some(started) => {
                self.metrics
                    .maintenance_start
                    .get_or_create(&labels)
                    .set(started.timestamp());
            }
            None => {
                self.metrics.maintenance_start.remove(&labels);
            }
        }
    }

    fn drain_finished(&self, took: Duration) {
        self.metrics.drain_duration.observe(took.as_secs_f64());
    }

    fn drain_pass(&self) {
        self.metrics.drain_passes.inc();
    }

    fn lease_operation(&self, op: LeaseOp, result: LeaseResult) {
        self.metrics
            .lease_operations
            .get_or_create(&LeaseLabels {
                operation: op.as_str(),
                result: result.as_str(),
            })
            .inc();
    }

    fn diagnosis_reads(&self, reads: u32) {
        self.metrics.drain.diagnosis_reads(reads);
    }

    fn drain_blocked(
        &self,
        maintenance: &str,
        node: &str,
        blocked: Option<(&'static str, chrono::DateTime<chrono::Utc>)>,
    ) {
        self.metrics.drain.set_blocked(maintenance, node, blocked);
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    fn scrape(observer: &ProcessObserver) -> String {
        let mut registry = Registry::default();
        observer.metrics.register(&mut registry);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn phase_changes_move_one_maintenance_between_phases() {
        let observer = ProcessObserver::default();
        observer.maintenance_phase(None, Some(Phase::Running));
        observer.maintenance_phase(Some(Phase::Running), Some(Phase::Succeeded));
        let text = scrape(&observer);
        assert!(
            text.contains("nmo_maintenances{phase=\"Running\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("nmo_maintenances{phase=\"Succeeded\"} 1"),
            "{text}"
        );
        observer.maintenance_phase(Some(Phase::Succeeded), None);
        assert!(scrape(&observer).contains("nmo_maintenances{phase=\"Succeeded\"} 0"));
    }

    #[test]
    fn a_running_maintenance_shows_its_start_until_it_is_no_longer_running() {
        let observer = ProcessObserver::default();
        let created = chrono::DateTime::from_timestamp(1_780_000_000, 0).unwrap();
        observer.maintenance_running("nm-1", "worker-1", Some(created));
        observer.maintenance_running("nm-2", "worker-2", Some(created));
        let text = scrape(&observer);
        assert!(
            text.contains(
                "nmo_maintenance_start_time_seconds{nodemaintenance=\"nm-1\",node=\"worker-1\"} 1780000000"
            ),
            "{text}"
        );
        observer.maintenance_running("nm-1", "worker-1", None);
        let text = scrape(&observer);
        assert!(!text.contains("nm-1"), "{text}");
        assert!(text.contains("nodemaintenance=\"nm-2\""), "{text}");
    }

    #[test]
    fn counters_carry_their_labels() {
        let observer = ProcessObserver::default();
        observer.eviction(EvictionResult::BlockedByPdb);
        observer.eviction(EvictionResult::BlockedByPdb);
        observer.lease_operation(LeaseOp::Renew, LeaseResult::Ok);
        observer.drain_finished(Duration::from_secs(3));
        let text = scrape(&observer);
        assert!(
            text.contains("nmo_evictions_total{result=\"blocked_by_pdb\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("nmo_lease_operations_total{operation=\"renew\",result=\"ok\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("nmo_drain_duration_seconds_count 1"),
            "{text}"
        );
        assert!(
            text.contains("nmo_drain_duration_seconds_bucket{le=\"4.0\"} 1"),
            "{text}"
        );
    }
}
