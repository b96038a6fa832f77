//! When to ask again for a pod that something intercepts (pure; time is passed in).
//!
//! Where an admission webhook or KubeVirt acts on eviction requests, a refusal does not mean
//! "wait for the budget": the request itself set something in motion (a live migration, a
//! rolling restart) and the pod leaves when that is done, or the next request is approved.
//! kubectl drain asks every 5 s; nmo asks after 5 s, then backs off to at most every 30 s, so a
//! migration of minutes costs a handful of requests, not one every 5 s.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use crate::model::PodRef;

/// The first re-ask after a refusal: kubectl drain's and NMO's pace.
pub(super) const REASK_FIRST: Duration = Duration::from_secs(5);
/// Never slower than this: the pod is asked at least this often until it leaves.
pub(super) const REASK_MAX: Duration = Duration::from_secs(30);

/// The wait before the re-ask after `refusals` refusals in a row, `jitter` in 0.8..=1.0 of the
/// full step (re-asks of pods refused together spread out, none waits longer than the step).
pub(super) fn reask_delay(refusals: u32, jitter: f64) -> Duration {
    let exp = refusals.saturating_sub(1).min(8);
    let full = REASK_FIRST.saturating_mul(1u32 << exp).min(REASK_MAX);
    full.mul_f64(jitter.clamp(0.8, 1.0))
}

/// The pods to ask again, each at its time.
#[derive(Debug, Default)]
pub(super) struct Reasks {
    due: BTreeSet<(Instant, PodRef)>,
    at: HashMap<PodRef, Instant>,
}

impl Reasks {
    /// `pod` is asked again at `when` (replacing an earlier plan for it).
    pub(super) fn schedule(&mut self, pod: PodRef, when: Instant) {
        if let Some(before) = self.at.insert(pod.clone(), when) {
            self.due.remove(&(before, pod.clone()));
        }
        self.due.insert((when, pod));
    }

    /// No re-ask for `pod` any more.
    pub(super) fn forget(&mut self, pod: &PodRef) {
        if let Some(when) = self.at.remove(pod) {
            self.due.remove(&(when, pod.clone()));
        }
    }

    /// The pods due by `now`, taken out, earliest first.
    pub(super) fn take_due(&mut self, now: Instant) -> Vec<PodRef> {
        let mut taken = Vec::new();
        while let Some((when, _)) = self.due.first() {
            if *when > now {
                break;
            }
            if let Some((_, pod)) = self.due.pop_first() {
                self.at.remove(&pod);
                taken.push(pod);
            }
        }
        taken
    }

    /// When the next re-ask is due, if any.
    pub(super) fn next(&self) -> Option<Instant> {
        self.due.first().map(|(when, _)| *when)
    }

    /// How many re-asks are planned.
    pub(super) fn len(&self) -> usize {
        self.at.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> PodRef {
        PodRef {
            namespace: "vms".into(),
            name: name.into(),
        }
    }

    #[test]
    fn re_asks_start_at_five_seconds_and_never_wait_more_than_thirty() {
        assert_eq!(reask_delay(1, 1.0), Duration::from_secs(5));
        assert_eq!(reask_delay(2, 1.0), Duration::from_secs(10));
        assert_eq!(reask_delay(3, 1.0), Duration::from_secs(20));
        assert_eq!(reask_delay(4, 1.0), Duration::from_secs(30));
        assert_eq!(reask_delay(100, 1.0), Duration::from_secs(30));
        assert_eq!(reask_delay(1, 0.8), Duration::from_secs(4));
        assert_eq!(
            reask_delay(1, 0.1),
            Duration::from_secs(4),
            "jitter is bounded"
        );
    }

    #[test]
    fn due_pods_come_out_in_order_and_a_new_plan_replaces_the_old() {
        let start = Instant::now();
        let mut reasks = Reasks::default();
        reasks.schedule(pod("b"), start + Duration::from_secs(10));
        reasks.schedule(pod("a"), start + Duration::from_secs(5));
        reasks.schedule(pod("c"), start + Duration::from_secs(1));
        reasks.schedule(pod("c"), start + Duration::from_secs(7));
        assert_eq!(reasks.next(), Some(start + Duration::from_secs(5)));
        assert!(reasks.take_due(start + Duration::from_secs(4)).is_empty());
        assert_eq!(
            reasks.take_due(start + Duration::from_secs(8)),
            [pod("a"), pod("c")]
        );
        reasks.forget(&pod("b"));
        assert_eq!((reasks.next(), reasks.len()), (None, 0));
    }
}
