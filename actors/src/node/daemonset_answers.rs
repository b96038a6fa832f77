//! What a node actor learned of the DaemonSets its pods name as their controller: whether each
//! still exists, so that a drain pass need not ask again for every pod.
//!
//! An answer is about one DaemonSet, its uid included: one deleted with `--cascade=orphan` and
//! created again under the same name is another DaemonSet, whose new pods must never be taken
//! for the old one's orphans (they would be removed each time they appear). And an answer is
//! trusted for [`ANSWER_TTL`] only: a DaemonSet deleted meanwhile makes its pods orphans, which
//! the drain then removes.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::decisions::DaemonSetRef;

/// How long an answer is trusted.
pub const ANSWER_TTL: Duration = Duration::from_secs(60);

/// The answers, by DaemonSet (namespace, name and uid).
#[derive(Debug, Clone, Default)]
pub struct DaemonSets {
    answers: HashMap<DaemonSetRef, (bool, Instant)>,
}

impl DaemonSets {
    /// Whether `daemonset` exists, if known and still fresh.
    pub fn get(&self, daemonset: &DaemonSetRef) -> Option<bool> {
        self.answers
            .get(daemonset)
            .filter(|(_, at)| at.elapsed() < ANSWER_TTL)
            .map(|(exists, _)| *exists)
    }

    /// Remembers that `daemonset` exists (or not), as of now.
    pub fn learn(&mut self, daemonset: DaemonSetRef, exists: bool) {
        self.answers.insert(daemonset, (exists, Instant::now()));
    }

    /// Takes in what `other` learned (newer answers win), and forgets stale answers.
    pub fn extend(&mut self, other: DaemonSets) {
        for (daemonset, (exists, at)) in other.answers {
            let newer = self
                .answers
                .get(&daemonset)
                .is_none_or(|(_, known)| *known <= at);
            if newer {
                self.answers.insert(daemonset, (exists, at));
            }
        }
        self.answers.retain(|_, (_, at)| at.elapsed() < ANSWER_TTL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(uid: &str) -> DaemonSetRef {
        DaemonSetRef {
            namespace: "kube-system".into(),
            name: "agent".into(),
            uid: uid.into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn answers_are_per_uid_and_expire() {
        let mut known = DaemonSets::default();
        known.learn(agent("old"), false);
        assert_eq!(known.get(&agent("old")), Some(false));
        assert_eq!(
            known.get(&agent("new")),
            None,
            "a DaemonSet created again under the same name is another one"
        );
        tokio::time::advance(ANSWER_TTL).await;
        assert_eq!(known.get(&agent("old")), None, "expired");
    }

    #[tokio::test(start_paused = true)]
    async fn what_a_pass_learned_is_taken_in_and_stale_answers_forgotten() {
        let mut known = DaemonSets::default();
        known.learn(agent("a"), true);
        tokio::time::advance(ANSWER_TTL).await;
        let mut learned = DaemonSets::default();
        learned.learn(agent("b"), false);
        known.extend(learned);
        assert_eq!(known.get(&agent("b")), Some(false));
        assert_eq!(known.answers.len(), 1, "the stale answer is gone");
    }
}
