//! The metric families of controller-runtime that dashboards for Kubernetes operators read,
//! with controller-runtime's names, labels and buckets, mapped onto what nmo's actors do
//! (`controller="nodemaintenance"`):
//!
//! - **One reconcile** is one operation of a node actor: a start-up or repair pass (finalizer,
//!   lease, labels, taint, cordon), a drain pass (classify the node's pods, evict or delete
//!   them), or an undo. Each NodeMaintenance has its own actor, and an actor runs one operation
//!   at a time, as controller-runtime runs one reconcile per object at a time.
//!   `controller_runtime_reconcile_total{result}` counts them by `success` or `error` (nmo
//!   reschedules through its actors' timers, not through requeue results, so `requeue` and
//!   `requeue_after` never appear); `_errors_total` the errors; `_time_seconds` their duration.
//! - **Workers**: `controller_runtime_max_concurrent_reconciles` is how many operations could
//!   run at once, one per node actor (one per NodeMaintenance driven); `_active_workers` how
//!   many run now.
//! - **Work queues**: `workqueue_depth` and `workqueue_adds_total` for `name="nodemaintenance"`
//!   (the NodeMaintenance watch's changes, deletions and listings handed to the supervisor and
//!   not yet handled) and `name="eviction"` (eviction requests waiting in the eviction actor:
//!   queued, or parked behind a PodDisruptionBudget's backoff).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The controller name the families carry (the Go operator's controller's).
pub const CONTROLLER: &str = "nodemaintenance";
/// The work queue of the NodeMaintenance watch's messages to the supervisor.
pub const WATCH_QUEUE: &str = "nodemaintenance";
/// The eviction actor's queue.
pub const EVICTION_QUEUE: &str = "eviction";

/// controller-runtime's reconcile time buckets (seconds).
const RECONCILE_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: &'static str,
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    controller: &'static str,
    name: &'static str,
}

const OURS: ControllerLabels = ControllerLabels {
    controller: CONTROLLER,
};

/// The families; cheap to clone (the metrics are shared).
#[derive(Debug, Clone)]
pub struct ControllerMetrics {
    reconciles: Family<ResultLabels, Counter>,
    errors: Family<ControllerLabels, Counter>,
    time: Family<ControllerLabels, Histogram>,
    max_concurrent: Family<ControllerLabels, Gauge>,
    active: Family<ControllerLabels, Gauge>,
    depth: Family<QueueLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
}

impl Default for ControllerMetrics {
    fn default() -> Self {
        let metrics = ControllerMetrics {
            reconciles: Family::default(),
            errors: Family::default(),
            time: Family::new_with_constructor(|| Histogram::new(RECONCILE_BUCKETS)),
            max_concurrent: Family::default(),
            active: Family::default(),
            depth: Family::default(),
            adds: Family::default(),
        };
        // Every series exists from the start at zero, as controller-runtime's do.
        for result in ["success", "error"] {
            drop(metrics.reconciles.get_or_create(&ResultLabels {
                controller: CONTROLLER,
                result,
            }));
        }
        drop(metrics.errors.get_or_create(&OURS));
        drop(metrics.time.get_or_create(&OURS));
        drop(metrics.max_concurrent.get_or_create(&OURS));
        drop(metrics.active.get_or_create(&OURS));
        for name in [WATCH_QUEUE, EVICTION_QUEUE] {
            let queue = QueueLabels {
                controller: CONTROLLER,
                name,
            };
            drop(metrics.depth.get_or_create(&queue));
            drop(metrics.adds.get_or_create(&queue));
        }
        metrics
    }
}

impl ControllerMetrics {
    /// Registers every family in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller (nmo: node actor operations, by result)",
            self.reconciles.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            self.errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            self.time.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller (nmo: one per node actor)",
            self.max_concurrent.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            self.active.clone(),
        );
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue",
            self.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            self.adds.clone(),
        );
    }

    /// An operation started.
    pub fn started(&self) {
        self.active.get_or_create(&OURS).inc();
    }

    /// An operation ended after `took`: `failed`, or not; None when it was abandoned (counted
    /// as no reconcile).
    pub fn finished(&self, took: Duration, failed: Option<bool>) {
        self.active.get_or_create(&OURS).dec();
        let Some(failed) = failed else {
            return;
        };
        let result = if failed { "error" } else { "success" };
        self.reconciles
            .get_or_create(&ResultLabels {
                controller: CONTROLLER,
                result,
            })
            .inc();
        if failed {
            self.errors.get_or_create(&OURS).inc();
        }
        self.time.get_or_create(&OURS).observe(took.as_secs_f64());
    }

    /// The node actors driving maintenances changed by `delta` (+1 one more, -1 one fewer).
    pub fn workers_changed(&self, delta: i64) {
        self.max_concurrent.get_or_create(&OURS).inc_by(delta);
    }

    fn queue(&self, name: &'static str) -> QueueLabels {
        QueueLabels {
            controller: CONTROLLER,
            name,
        }
    }

    /// An item was added to the queue `name`.
    pub fn added(&self, name: &'static str) {
        let queue = self.queue(name);
        self.adds.get_or_create(&queue).inc();
        if name == WATCH_QUEUE {
            self.depth.get_or_create(&queue).inc();
        }
    }

    /// An item of the NodeMaintenance watch's queue was handled.
    pub fn watch_event_handled(&self) {
        self.depth.get_or_create(&self.queue(WATCH_QUEUE)).dec();
    }

    /// The eviction queue holds `waiting` requests.
    pub fn eviction_depth(&self, waiting: usize) {
        self.depth
            .get_or_create(&self.queue(EVICTION_QUEUE))
            .set(i64::try_from(waiting).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    fn scrape(metrics: &ControllerMetrics) -> String {
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        text
    }

    #[test]
    fn operations_count_as_reconciles_with_controller_runtime_s_names() {
        let metrics = ControllerMetrics::default();
        let text = scrape(&metrics);
        assert!(
            text.contains(
                "controller_runtime_reconcile_total{controller=\"nodemaintenance\",result=\"error\"} 0"
            ),
            "every series from the start: {text}"
        );
        metrics.workers_changed(1);
        metrics.workers_changed(1);
        metrics.started();
        metrics.started();
        metrics.started();
        metrics.finished(Duration::from_millis(30), Some(false));
        metrics.finished(Duration::from_secs(2), Some(true));
        metrics.finished(Duration::from_secs(1), None);
        let text = scrape(&metrics);
        for line in [
            "controller_runtime_reconcile_total{controller=\"nodemaintenance\",result=\"success\"} 1",
            "controller_runtime_reconcile_total{controller=\"nodemaintenance\",result=\"error\"} 1",
            "controller_runtime_reconcile_errors_total{controller=\"nodemaintenance\"} 1",
            "controller_runtime_reconcile_time_seconds_count{controller=\"nodemaintenance\"} 2",
            "controller_runtime_reconcile_time_seconds_bucket{le=\"0.05\",controller=\"nodemaintenance\"} 1",
            "controller_runtime_active_workers{controller=\"nodemaintenance\"} 0",
            "controller_runtime_max_concurrent_reconciles{controller=\"nodemaintenance\"} 2",
        ] {
            assert!(text.contains(line), "{line} in:\n{text}");
        }
    }

    #[test]
    fn queues_count_adds_and_depth() {
        let metrics = ControllerMetrics::default();
        metrics.added(WATCH_QUEUE);
        metrics.added(WATCH_QUEUE);
        metrics.watch_event_handled();
        metrics.added(EVICTION_QUEUE);
        metrics.eviction_depth(7);
        let text = scrape(&metrics);
        for line in [
            "workqueue_adds_total{controller=\"nodemaintenance\",name=\"nodemaintenance\"} 2",
            "workqueue_depth{controller=\"nodemaintenance\",name=\"nodemaintenance\"} 1",
            "workqueue_adds_total{controller=\"nodemaintenance\",name=\"eviction\"} 1",
            "workqueue_depth{controller=\"nodemaintenance\",name=\"eviction\"} 7",
        ] {
            assert!(text.contains(line), "{line} in:\n{text}");
        }
    }
}
