//! What a PDB's spec and status say on their own: whether it can ever allow a disruption.

use std::fmt;

use super::types::{IntOrPercent, Pdb};

/// Why a PDB can never allow a disruption: no amount of waiting helps, a person must relax
/// the PDB, scale the workload or fix its pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Structural {
    /// `maxUnavailable: 0` (or `0%`).
    MaxUnavailableZero {
        /// As written.
        value: String,
    },
    /// `minAvailable` is at least the number of pods the PDB expects.
    MinAvailableAllPods {
        /// As written.
        value: String,
        /// `status.expectedPods`.
        expected: i32,
    },
    /// The PDB wants every pod it expects healthy (e.g. `maxUnavailable: 10%` of three pods
    /// rounds down to none), so not one may go.
    NeedsEveryPodHealthy {
        /// `status.desiredHealthy`.
        desired: i32,
        /// `status.expectedPods`.
        expected: i32,
    },
    /// None of the PDB's pods is healthy, so none may go (unless its unhealthy pods may
    /// always be evicted).
    NoHealthyPods {
        /// `status.expectedPods`.
        expected: i32,
    },
    /// The disruption controller cannot compute the PDB (e.g. `maxUnavailable` over pods
    /// without a controller): it allows nothing until that is fixed.
    SyncFailed {
        /// The controller's message.
        message: String,
    },
}

impl fmt::Display for Structural {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Structural::MaxUnavailableZero { value } => {
                write!(f, "maxUnavailable is {value}: it never allows a disruption")
            }
            Structural::MinAvailableAllPods { value, expected } => write!(
                f,
                "minAvailable {value} covers all {expected} expected pods: it never allows a disruption"
            ),
            Structural::NeedsEveryPodHealthy { desired, expected } => write!(
                f,
                "it needs {desired} of its {expected} expected pods healthy: it never allows a disruption"
            ),
            Structural::NoHealthyPods { expected } => write!(
                f,
                "none of its {expected} expected pods is healthy: it allows no disruption until they are"
            ),
            Structural::SyncFailed { message } => {
                write!(f, "the disruption controller cannot compute it: {message}")
            }
        }
    }
}

/// Whether `pdb` can never allow a disruption as it stands, and why. Only a fresh status is
/// read (a stale one may describe an older spec).
pub fn structural(pdb: &Pdb) -> Option<Structural> {
    if let Some(value @ (IntOrPercent::Int(0) | IntOrPercent::Percent(0))) = &pdb.max_unavailable {
        return Some(Structural::MaxUnavailableZero {
            value: value.text(),
        });
    }
    let status = pdb.fresh_status()?;
    if let Some(message) = &status.sync_failed {
        return Some(Structural::SyncFailed {
            message: message.clone(),
        });
    }
    if let Some(min) = &pdb.min_available {
        let covers_all = match min {
            IntOrPercent::Int(n) => *n >= status.expected_pods,
            IntOrPercent::Percent(p) => *p >= 100,
        };
        if covers_all && status.expected_pods > 0 {
            return Some(Structural::MinAvailableAllPods {
                value: min.text(),
                expected: status.expected_pods,
            });
        }
    }
    if status.expected_pods > 0 && status.desired_healthy >= status.expected_pods {
        return Some(Structural::NeedsEveryPodHealthy {
            desired: status.desired_healthy,
            expected: status.expected_pods,
        });
    }
    // With `unhealthyPodEvictionPolicy: AlwaysAllow` the unhealthy pods may go anyway.
    if status.expected_pods > 0
        && status.current_healthy == 0
        && status.desired_healthy > 0
        && !pdb.always_allow_unhealthy
    {
        return Some(Structural::NoHealthyPods {
            expected: status.expected_pods,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pdb::{LabelSelector, PdbStatus};

    fn pdb(
        min: Option<IntOrPercent>,
        max: Option<IntOrPercent>,
        healthy: i32,
        expected: i32,
    ) -> Pdb {
        Pdb {
            namespace: "app".into(),
            name: "db".into(),
            generation: 1,
            selector: Some(LabelSelector::labels([("app", "db")])),
            min_available: min,
            max_unavailable: max,
            always_allow_unhealthy: false,
            status: Some(PdbStatus {
                observed_generation: 1,
                current_healthy: healthy,
                desired_healthy: 1,
                expected_pods: expected,
                ..PdbStatus::default()
            }),
        }
    }

    #[test]
    fn max_unavailable_zero_never_allows() {
        let b = pdb(None, Some(IntOrPercent::Percent(0)), 3, 3);
        assert_eq!(
            structural(&b).map(|s| s.to_string()),
            Some("maxUnavailable is 0%: it never allows a disruption".into())
        );
        assert_eq!(
            structural(&pdb(None, Some(IntOrPercent::Int(1)), 3, 3)),
            None
        );
    }

    #[test]
    fn min_available_of_every_pod_never_allows() {
        let all = pdb(Some(IntOrPercent::Int(1)), None, 1, 1);
        assert!(matches!(
            structural(&all),
            Some(Structural::MinAvailableAllPods { expected: 1, .. })
        ));
        let hundred = pdb(Some(IntOrPercent::Percent(100)), None, 3, 3);
        assert!(structural(&hundred).is_some());
        assert_eq!(
            structural(&pdb(Some(IntOrPercent::Int(2)), None, 3, 3)),
            None
        );
    }

    #[test]
    fn no_healthy_pod_or_a_failed_sync_blocks_too() {
        assert_eq!(
            structural(&pdb(None, Some(IntOrPercent::Int(1)), 0, 3)),
            Some(Structural::NoHealthyPods { expected: 3 })
        );
        let mut failed = pdb(None, Some(IntOrPercent::Int(1)), 3, 3);
        if let Some(status) = failed.status.as_mut() {
            status.sync_failed = Some("found no controller ref for pod \"x\"".into());
        }
        assert!(matches!(
            structural(&failed),
            Some(Structural::SyncFailed { .. })
        ));
    }

    #[test]
    fn a_pdb_needing_every_pod_healthy_never_allows() {
        // maxUnavailable 10% of 3 pods rounds down: the controller wants all 3 healthy.
        let mut rounded = pdb(None, Some(IntOrPercent::Percent(10)), 3, 3);
        if let Some(status) = rounded.status.as_mut() {
            status.desired_healthy = 3;
        }
        assert_eq!(
            structural(&rounded),
            Some(Structural::NeedsEveryPodHealthy {
                desired: 3,
                expected: 3
            })
        );
    }

    #[test]
    fn unhealthy_pods_that_may_always_go_are_not_a_block() {
        let mut b = pdb(None, Some(IntOrPercent::Int(1)), 0, 3);
        b.always_allow_unhealthy = true;
        assert_eq!(structural(&b), None);
    }

    #[test]
    fn a_stale_status_is_not_read() {
        let mut b = pdb(Some(IntOrPercent::Int(1)), None, 1, 1);
        b.generation = 2;
        assert_eq!(structural(&b), None);
    }
}
