//! Whether a maintenance's drain is blocked, by what, since when, and when to say so (pure).
//!
//! The maintenance as a whole shows the most severe blocker among its pending pods (one that
//! needs a person before one that resolves by waiting; the first pending pod on a tie). An
//! event goes out once per change of the blocker's class, not per retry nor per pod.

use chrono::{DateTime, Utc};

use super::pending::PendingPod;
use super::reasons::Reasons;
use crate::diagnosis::Blocker;
use crate::model::PodRef;

/// The maintenance's blocker: the most severe among its pending pods', with its pod.
pub(super) fn worst<'a>(
    pending: &'a [PendingPod],
    reasons: Reasons<'a>,
) -> Option<(&'a PodRef, &'a Blocker)> {
    let mut worst: Option<(&PodRef, &Blocker)> = None;
    for pod in pending {
        let Some(blocker) = reasons.get(&pod.pod).and_then(|r| r.blocker.as_ref()) else {
            continue;
        };
        if worst.is_none_or(|(_, w)| blocker.severity() > w.severity()) {
            worst = Some((&pod.pod, blocker));
        }
    }
    worst
}

/// How the blockage changed with the latest status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Change {
    /// The class now blocking (None: not blocked) and since when.
    pub(super) now: Option<(&'static str, DateTime<Utc>)>,
    /// Whether that differs from before (the metric and the trace hear of it).
    pub(super) changed: bool,
    /// An event is due: the class differs from the last one announced.
    pub(super) announce: bool,
}

/// A maintenance's blockage over time.
#[derive(Debug, Default)]
pub(super) struct Blockage {
    /// The class and since when the drain is (continuously) blocked.
    current: Option<(&'static str, DateTime<Utc>)>,
    /// The class last announced in an event.
    announced: Option<&'static str>,
}

impl Blockage {
    /// Takes in the current blocker (None: nothing blocks).
    pub(super) fn update(&mut self, blocker: Option<&Blocker>, now: DateTime<Utc>) -> Change {
        let before = self.current;
        self.current = match (blocker, before) {
            (None, _) => None,
            // Blocked since the first moment, whatever the class became meanwhile.
            (Some(b), Some((_, since))) => Some((b.reason(), since)),
            (Some(b), None) => Some((b.reason(), now)),
        };
        let announce = match blocker {
            Some(b) if self.announced != Some(b.reason()) => {
                self.announced = Some(b.reason());
                true
            }
            _ => false,
        };
        Change {
            now: self.current,
            changed: before != self.current,
            announce,
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use std::collections::BTreeMap;

    use super::*;
    use crate::decisions::PodAction;
    use crate::node::pending::PodReason;
    use crate::pdb::Structural;

    fn at(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + s, 0).single().unwrap()
    }

    fn waiting() -> Blocker {
        Blocker::WaitingForReplacement {
            pdb: "web".into(),
            replacement: None,
            healthy: 1,
            desired: 1,
        }
    }

    fn structural() -> Blocker {
        Blocker::StructuralBudget {
            pdb: "db".into(),
            why: Structural::MaxUnavailableZero { value: "0".into() },
        }
    }

    fn pending(name: &str) -> PendingPod {
        PendingPod::of(
            &std::sync::Arc::new(crate::model::PodInfo::test("app", name)),
            PodAction::Evict,
        )
    }

    fn reason(blocker: Blocker) -> PodReason {
        PodReason {
            blocker: Some(blocker),
            ..PodReason::of_action(PodAction::Evict)
        }
    }

    #[test]
    fn the_most_severe_blocker_stands_for_the_maintenance() {
        let pods = [pending("a"), pending("b"), pending("c")];
        let reasons = BTreeMap::from([
            (pods[0].pod.clone(), reason(waiting())),
            (pods[1].pod.clone(), reason(structural())),
            (pods[2].pod.clone(), reason(structural())),
        ]);
        let (pod, blocker) = worst(&pods, Reasons::told(&reasons)).unwrap();
        assert_eq!((&*pod.name, blocker.reason()), ("b", "StructuralBudget"));
        assert!(worst(&pods, Reasons::told(&BTreeMap::new())).is_none());
    }

    #[test]
    fn one_event_per_class_and_blocked_since_the_first_moment() {
        let mut b = Blockage::default();
        let first = b.update(Some(&waiting()), at(0));
        assert_eq!(first.now, Some(("WaitingForReplacement", at(0))));
        assert!(first.changed && first.announce);
        let same = b.update(Some(&waiting()), at(5));
        assert!(!same.changed && !same.announce, "a retry says nothing new");
        let worse = b.update(Some(&structural()), at(9));
        assert_eq!(worse.now, Some(("StructuralBudget", at(0))));
        assert!(worse.changed && worse.announce);
        let clear = b.update(None, at(12));
        assert_eq!(clear.now, None);
        assert!(clear.changed && !clear.announce);
        let again = b.update(Some(&structural()), at(20));
        assert_eq!(again.now, Some(("StructuralBudget", at(20))));
        assert!(!again.announce, "the same class was announced already");
    }
}
