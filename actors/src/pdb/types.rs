//! A `policy/v1` PodDisruptionBudget reduced to what gating and diagnosis read.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::selector::LabelSelector;

/// `minAvailable` / `maxUnavailable`: a number of pods or a percentage of the expected pods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum IntOrPercent {
    /// A number of pods.
    Int(i32),
    /// A percentage (`"50%"` is 50).
    Percent(i32),
}

impl IntOrPercent {
    /// The API's form, e.g. `1` or `50%`.
    pub fn text(&self) -> String {
        match self {
            IntOrPercent::Int(n) => n.to_string(),
            IntOrPercent::Percent(p) => format!("{p}%"),
        }
    }
}

/// `status` of a PDB as the disruption controller last wrote it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PdbStatus {
    /// `observedGeneration`: the spec generation the numbers were computed for.
    pub observed_generation: i64,
    /// `disruptionsAllowed`.
    pub disruptions_allowed: i32,
    /// `currentHealthy`.
    pub current_healthy: i32,
    /// `desiredHealthy`.
    pub desired_healthy: i32,
    /// `expectedPods`.
    pub expected_pods: i32,
    /// Names of the pods in `disruptedPods`: evictions the API accepted (and already took off
    /// `disruptionsAllowed`) that the controller has not seen through yet.
    pub disrupted_pods: BTreeSet<String>,
    /// The controller cannot compute the PDB (condition `DisruptionAllowed` with reason
    /// `SyncFailed`): its message. Such a PDB allows nothing until fixed.
    pub sync_failed: Option<String>,
}

/// A PodDisruptionBudget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pdb {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// `spec.selector`; None when null or not understood (selects nothing).
    pub selector: Option<LabelSelector>,
    /// `spec.minAvailable`.
    pub min_available: Option<IntOrPercent>,
    /// `spec.maxUnavailable`.
    pub max_unavailable: Option<IntOrPercent>,
    /// `spec.unhealthyPodEvictionPolicy: AlwaysAllow`: unready pods may always be evicted.
    pub always_allow_unhealthy: bool,
    /// `status`, once the controller wrote one.
    pub status: Option<PdbStatus>,
}

impl Pdb {
    /// `<namespace>/<name>`: the PDB's identity in gates and diagnoses.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether the Eviction API checks this PDB for a pod with `labels` in `namespace`. As
    /// the API's eviction registry does, a null or empty selector selects nothing (the
    /// disruption controller reads an empty one as "everything", the eviction does not).
    pub fn selects(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        namespace == self.namespace
            && self
                .selector
                .as_ref()
                .is_some_and(|s| !s.is_empty() && s.matches(labels))
    }

    /// The status when it describes the current spec (`observedGeneration >= generation`);
    /// None when there is none or it is stale, i.e. the Eviction API itself would refuse with
    /// "still being processed".
    pub fn fresh_status(&self) -> Option<&PdbStatus> {
        self.status
            .as_ref()
            .filter(|s| s.observed_generation >= self.generation)
    }

    /// The PDB's numbers as the Eviction API's refusal words them.
    pub fn refusal_message(&self) -> String {
        match &self.status {
            Some(status) => format!(
                "The disruption budget {} needs {} healthy pods and has {} currently",
                self.name, status.desired_healthy, status.current_healthy
            ),
            None => format!(
                "The disruption budget {} is still being processed by the server",
                self.name
            ),
        }
    }
}

/// What the shared PDB watch reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PdbChange {
    /// Every PDB, after the initial list or a relist: replaces what was known.
    Listed(Vec<Pdb>),
    /// A PDB was created or changed.
    Applied(Pdb),
    /// A PDB was deleted.
    Deleted {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pdb(generation: i64, observed: i64) -> Pdb {
        Pdb {
            namespace: "app".into(),
            name: "web".into(),
            generation,
            selector: Some(LabelSelector::labels([("app", "web")])),
            min_available: None,
            max_unavailable: Some(IntOrPercent::Int(1)),
            always_allow_unhealthy: false,
            status: Some(PdbStatus {
                observed_generation: observed,
                disruptions_allowed: 1,
                current_healthy: 3,
                desired_healthy: 2,
                expected_pods: 3,
                ..PdbStatus::default()
            }),
        }
    }

    #[test]
    fn a_status_for_an_older_spec_is_stale() {
        assert!(pdb(2, 2).fresh_status().is_some());
        assert!(pdb(2, 1).fresh_status().is_none());
        let mut unsynced = pdb(1, 1);
        unsynced.status = None;
        assert!(unsynced.fresh_status().is_none());
    }

    #[test]
    fn an_empty_or_null_selector_selects_nothing_for_eviction() {
        let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
        let mut b = pdb(1, 1);
        assert!(b.selects("app", &labels));
        assert!(!b.selects("other", &labels), "only its own namespace");
        b.selector = Some(LabelSelector::default());
        assert!(!b.selects("app", &labels));
        b.selector = None;
        assert!(!b.selects("app", &labels));
    }

    #[test]
    fn the_refusal_message_has_the_apis_words() {
        assert_eq!(
            pdb(1, 1).refusal_message(),
            "The disruption budget web needs 2 healthy pods and has 3 currently"
        );
        assert_eq!(IntOrPercent::Percent(50).text(), "50%");
    }
}
