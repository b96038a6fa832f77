//! Metrics of blocked drains: since when each maintenance's drain is blocked (what the
//! monitoring component's alert reads), how many are blocked by each class of blocker, and the
//! reads spent explaining them.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use nmo_actors::diagnosis::Blocker;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Labels of `nmo_maintenance_blocked_since_seconds`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MaintenanceLabels {
    nodemaintenance: String,
    node: String,
}

/// Label of `nmo_drains_blocked`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

/// The blocked-drain metrics; cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct DrainMetrics {
    blocked_since: Family<MaintenanceLabels, Gauge>,
    blocked: Family<ReasonLabels, Gauge>,
    diagnosis_reads: Counter<u64, AtomicU64>,
    /// The class each blocked maintenance was last counted under.
    classes: Arc<Mutex<HashMap<MaintenanceLabels, &'static str>>>,
}

impl DrainMetrics {
    /// Registers every metric in `registry`; each class shows, 0 when none is blocked by it.
    pub fn register(&self, registry: &mut Registry) {
        for reason in Blocker::REASONS {
            drop(self.blocked.get_or_create(&ReasonLabels { reason }));
        }
        registry.register(
            "nmo_maintenance_blocked_since_seconds",
            "Per NodeMaintenance whose drain is blocked by a PodDisruptionBudget: the unix time since when (absent when not blocked)",
            self.blocked_since.clone(),
        );
        registry.register(
            "nmo_drains_blocked",
            "NodeMaintenances whose drain is blocked, by class (WaitingForReplacement, ReplacementUnschedulable, CrossNodeDeadlock, StructuralBudget, MultipleBudgets, BudgetExhausted)",
            self.blocked.clone(),
        );
        registry.register(
            "nmo_drain_diagnosis_reads",
            "API reads made to explain why a PodDisruptionBudget blocks a drain",
            self.diagnosis_reads.clone(),
        );
    }

    /// The drain of `maintenance` is blocked by a blocker of class `reason` since `since`, or
    /// (None) not blocked.
    pub fn set_blocked(
        &self,
        maintenance: &str,
        node: &str,
        blocked: Option<(&'static str, DateTime<Utc>)>,
    ) {
        let labels = MaintenanceLabels {
            nodemaintenance: maintenance.to_string(),
            node: node.to_string(),
        };
        let mut classes = self.classes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(previous) = classes.remove(&labels) {
            self.blocked
                .get_or_create(&ReasonLabels { reason: previous })
                .dec();
        }
        match blocked {
            Some((reason, since)) => {
                self.blocked_since
                    .get_or_create(&labels)
                    .set(since.timestamp());
                self.blocked.get_or_create(&ReasonLabels { reason }).inc();
                classes.insert(labels, reason);
            }
            None => {
                self.blocked_since.remove(&labels);
            }
        }
    }

    /// `reads` more API reads were spent on diagnoses.
    pub fn diagnosis_reads(&self, reads: u32) {
        self.diagnosis_reads.inc_by(u64::from(reads));
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    fn scrape(metrics: &DrainMetrics) -> String {
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn a_blocked_drain_shows_since_when_and_its_class_until_it_is_not() {
        let metrics = DrainMetrics::default();
        let since = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        metrics.set_blocked("nm-1", "node-1", Some(("WaitingForReplacement", since)));
        metrics.set_blocked("nm-1", "node-1", Some(("CrossNodeDeadlock", since)));
        metrics.diagnosis_reads(3);
        let text = scrape(&metrics);
        assert!(
            text.contains(
                "nmo_maintenance_blocked_since_seconds{nodemaintenance=\"nm-1\",node=\"node-1\"} 1800000000"
            ),
            "{text}"
        );
        assert!(
            text.contains("nmo_drains_blocked{reason=\"CrossNodeDeadlock\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("nmo_drains_blocked{reason=\"WaitingForReplacement\"} 0"),
            "{text}"
        );
        assert!(text.contains("nmo_drain_diagnosis_reads_total 3"), "{text}");
        metrics.set_blocked("nm-1", "node-1", None);
        let text = scrape(&metrics);
        assert!(
            !text.contains("nmo_maintenance_blocked_since_seconds{"),
            "absent: {text}"
        );
        assert!(
            text.contains("nmo_drains_blocked{reason=\"CrossNodeDeadlock\"} 0"),
            "{text}"
        );
    }
}
