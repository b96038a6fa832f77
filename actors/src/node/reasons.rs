//! Why each pending pod is still there, as the status tells it: what the eviction actor
//! answered, overlaid with what the drain observes on its own (see `observed`).

use std::collections::BTreeMap;

use super::pending::PodReason;
use crate::model::PodRef;

/// A view of the pods' reasons: the drain's own observations first, then the eviction actor's
/// answers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Reasons<'a> {
    told: &'a BTreeMap<PodRef, PodReason>,
    observed: Option<&'a BTreeMap<PodRef, PodReason>>,
}

impl<'a> Reasons<'a> {
    /// The eviction actor's answers alone (the pure tests of the status use it).
    #[cfg(test)]
    pub(super) fn told(told: &'a BTreeMap<PodRef, PodReason>) -> Self {
        Reasons {
            told,
            observed: None,
        }
    }

    /// The answers, overlaid with `observed`.
    pub(super) fn overlaid(
        told: &'a BTreeMap<PodRef, PodReason>,
        observed: &'a BTreeMap<PodRef, PodReason>,
    ) -> Self {
        Reasons {
            told,
            observed: Some(observed),
        }
    }

    /// Why `pod` is still there, when something is known.
    pub(super) fn get(&self, pod: &PodRef) -> Option<&'a PodReason> {
        self.observed
            .and_then(|o| o.get(pod))
            .or_else(|| self.told.get(pod))
    }
}
