//! What a drain observes beyond the eviction actor's answers, and what that makes of its pods'
//! reasons: a node whose `Ready` condition is `False` or `Unknown` has no kubelet to finish its
//! terminating pods, so those wait for ever; the drain says so (`NodeNotReady`) instead of
//! "Terminating". Nothing is force-deleted.

use std::collections::BTreeMap;

use super::pending::{PendingPod, PendingReason, PodReason};
use crate::diagnosis::Blocker;
use crate::model::{NodeReady, PodRef};

/// The drain's observations and the reasons they give its pods.
#[derive(Debug, Default)]
pub(super) struct Observed {
    node: String,
    ready: NodeReady,
    reasons: BTreeMap<PodRef, PodReason>,
}

impl Observed {
    /// Takes in the node `name`'s `Ready` condition; true when it changed.
    pub(super) fn node_ready(&mut self, name: &str, ready: &NodeReady) -> bool {
        if self.node == name && self.ready == *ready {
            return false;
        }
        self.node = name.to_string();
        self.ready = ready.clone();
        true
    }

    /// The reasons the observations give (by pod), for the pods `pending` now.
    pub(super) fn reasons(&self) -> &BTreeMap<PodRef, PodReason> {
        &self.reasons
    }

    /// Works the reasons out again for the pods `pending` now.
    pub(super) fn refresh(&mut self, pending: &[PendingPod]) {
        self.reasons.clear();
        if !self.ready.is_down() {
            return;
        }
        let stuck: Vec<PodRef> = pending
            .iter()
            .filter(|p| p.source.terminating)
            .map(|p| p.pod.clone())
            .collect();
        if stuck.is_empty() {
            return;
        }
        let blocker = Blocker::NodeNotReady {
            node: self.node.clone(),
            status: self.ready.status.clone(),
            reason: self.ready.reason.clone(),
            since: self.ready.since,
            pods: stuck.clone(),
        };
        for pod in stuck {
            let reason = PodReason {
                reason: PendingReason::Terminating,
                pdb: None,
                message: String::new(),
                blocker: Some(blocker.clone()),
            };
            self.reasons.insert(pod, reason);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::decisions::PodAction;
    use crate::model::PodInfo;

    fn pending(name: &str, terminating: bool) -> PendingPod {
        let pod = Arc::new(PodInfo {
            terminating,
            ..PodInfo::test("app", name)
        });
        PendingPod::of(&pod, PodAction::Wait)
    }

    #[test]
    fn terminating_pods_on_a_node_that_is_not_ready_are_named_and_nothing_else() {
        let mut observed = Observed::default();
        let pods = [pending("stuck", true), pending("running", false)];
        assert!(observed.node_ready("n1", &NodeReady::ready()));
        observed.refresh(&pods);
        assert!(
            observed.reasons().is_empty(),
            "a Ready node finishes its pods"
        );
        let down = NodeReady {
            status: "Unknown".into(),
            since: None,
            reason: Some("NodeStatusUnknown".into()),
        };
        assert!(observed.node_ready("n1", &down));
        assert!(!observed.node_ready("n1", &down), "unchanged");
        observed.refresh(&pods);
        let reasons = observed.reasons();
        assert_eq!(reasons.len(), 1);
        let stuck = &reasons[&pods[0].pod];
        let blocker = stuck.blocker.as_ref().expect("a blocker");
        assert_eq!(blocker.reason(), "NodeNotReady");
        let text = blocker.to_string();
        assert!(text.contains("Ready=Unknown, NodeStatusUnknown"), "{text}");
        assert!(text.contains("app/stuck"), "{text}");
        assert!(blocker.needs_a_person());
    }
}
