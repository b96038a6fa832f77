//! The pods a drain still waits for, and why each one is still there (typed here; the status
//! carries the reason's text).

use std::fmt;
use std::sync::Arc;

use crate::decisions::PodAction;
use crate::diagnosis::Blocker;
use crate::eviction::EvictionReply;
use crate::model::{PendingPodReason, PodInfo, PodPhase, PodRef, Uid, conditions};

/// A pod the drain still waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PendingPod {
    /// The pod as the pass that made this entry saw it.
    pub(super) source: Arc<PodInfo>,
    pub(super) pod: PodRef,
    pub(super) uid: Uid,
    pub(super) action: PodAction,
    pub(super) grace: Option<i64>,
    /// Its labels (which PDBs select it).
    pub(super) labels: crate::model::Labels,
    /// Counted as healthy by a PDB (Running and Ready).
    pub(super) healthy: bool,
    /// Pending: the Eviction API deletes it without asking its PDB.
    pub(super) unstarted: bool,
    /// Its controller (the diagnosis looks for its replacement).
    pub(super) controller: Option<crate::model::OwnerRef>,
}

impl PendingPod {
    /// What the eviction actor needs of a pod besides its name.
    pub(super) fn of(pod: &Arc<PodInfo>, action: PodAction) -> Self {
        PendingPod {
            source: Arc::clone(pod),
            pod: pod.pod_ref(),
            uid: pod.uid.clone(),
            action,
            grace: pod.grace_period_seconds,
            labels: pod.labels.clone(),
            healthy: pod.ready && pod.phase == PodPhase::Running,
            unstarted: pod.phase == PodPhase::Pending,
            controller: pod.controller.clone(),
        }
    }
}

/// Why a pending pod is still on the node (`pendingPodsReasons[].reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PendingReason {
    /// To be evicted; not answered yet.
    Evicting,
    /// Eviction accepted: the pod is terminating.
    Evicted,
    /// Already terminating when seen.
    Terminating,
    /// Finished or orphaned: being deleted.
    Deleting,
    /// A PodDisruptionBudget refuses the eviction.
    BlockedByPdb,
    /// More than one PodDisruptionBudget matches the pod.
    TooManyPdbs,
    /// The pod's namespace is terminating.
    NamespaceTerminating,
    /// The eviction queue was full; asked again later.
    EvictionQueueFull,
    /// The eviction call failed.
    EvictionFailed,
    /// Something acts on the eviction request (a webhook, KubeVirt) and refused it for now:
    /// asked again until the pod leaves.
    EvictionIntercepted,
    /// Its KubeVirt VM is live-migrating away (or marked for it).
    LiveMigrating,
    /// Its KubeVirt VM must live-migrate and cannot.
    VmCannotMigrate,
}

impl PendingReason {
    /// The status text.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            PendingReason::Evicting => "Evicting",
            PendingReason::Evicted => "Evicted",
            PendingReason::Terminating => "Terminating",
            PendingReason::Deleting => "Deleting",
            PendingReason::BlockedByPdb => conditions::BLOCKED_BY_PDB,
            PendingReason::TooManyPdbs => "TooManyPodDisruptionBudgets",
            PendingReason::NamespaceTerminating => "NamespaceTerminating",
            PendingReason::EvictionQueueFull => "EvictionQueueFull",
            PendingReason::EvictionFailed => "EvictionFailed",
            PendingReason::EvictionIntercepted => "EvictionIntercepted",
            PendingReason::LiveMigrating => "LiveMigrating",
            PendingReason::VmCannotMigrate => "VmCannotMigrate",
        }
    }

    /// True while the pod is on its way out; false when something stands in its way (which
    /// `lastError` then names).
    pub(super) fn is_progress(self) -> bool {
        matches!(
            self,
            PendingReason::Evicting
                | PendingReason::Evicted
                | PendingReason::Terminating
                | PendingReason::Deleting
                | PendingReason::LiveMigrating
        )
    }

    /// Whether a status reason text names a pod on its way out (see [`Self::is_progress`]).
    pub(super) fn text_is_progress(text: &str) -> bool {
        [
            PendingReason::Evicting,
            PendingReason::Evicted,
            PendingReason::Terminating,
            PendingReason::Deleting,
            PendingReason::LiveMigrating,
        ]
        .iter()
        .any(|reason| reason.as_str() == text)
    }

    /// What a pod nobody answered for yet waits on, by what the drain does with it.
    pub(super) fn of_action(action: PodAction) -> Self {
        match action {
            PodAction::Wait => PendingReason::Terminating,
            PodAction::Delete => PendingReason::Deleting,
            PodAction::Evict | PodAction::CheckDaemonSet | PodAction::Skip(_) => {
                PendingReason::Evicting
            }
        }
    }
}

impl fmt::Display for PendingReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why one pod is still there, with the detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PodReason {
    pub(super) reason: PendingReason,
    /// The PDB refusing the eviction, when known.
    pub(super) pdb: Option<String>,
    /// The detail (for a PDB: the API's message with its numbers).
    pub(super) message: String,
    /// Why the PDB blocks it, as diagnosed.
    pub(super) blocker: Option<Blocker>,
}

impl PodReason {
    /// What an eviction reply says about its pod.
    pub(super) fn of_reply(reply: EvictionReply) -> Self {
        let (reason, pdb, message) = match reply {
            EvictionReply::Done => (
                PendingReason::Evicted,
                None,
                "eviction accepted, pod terminating".to_string(),
            ),
            EvictionReply::Blocked {
                pdb,
                message,
                blocker,
            } => {
                let reason = match &blocker {
                    Some(Blocker::MultipleBudgets { .. }) => PendingReason::TooManyPdbs,
                    Some(Blocker::EvictionIntercepted { .. }) => PendingReason::EvictionIntercepted,
                    _ => PendingReason::BlockedByPdb,
                };
                let blocker = blocker.or_else(|| {
                    Some(Blocker::BudgetExhausted {
                        pdb: pdb.clone(),
                        message: message.clone(),
                    })
                });
                return PodReason {
                    reason,
                    pdb,
                    message,
                    blocker,
                };
            }
            EvictionReply::TooManyPdbs { message } => {
                return PodReason {
                    reason: PendingReason::TooManyPdbs,
                    pdb: None,
                    message,
                    blocker: Some(Blocker::MultipleBudgets { pdbs: Vec::new() }),
                };
            }
            EvictionReply::NamespaceTerminating => (
                PendingReason::NamespaceTerminating,
                None,
                "the pod's namespace is terminating".to_string(),
            ),
            EvictionReply::Refused => (
                PendingReason::EvictionQueueFull,
                None,
                "eviction queue full, retrying".to_string(),
            ),
            EvictionReply::Failed(error) => (PendingReason::EvictionFailed, None, error),
        };
        PodReason {
            reason,
            pdb,
            message,
            blocker: None,
        }
    }

    /// A pod nobody answered for yet.
    pub(super) fn of_action(action: PodAction) -> Self {
        PodReason {
            reason: PendingReason::of_action(action),
            pdb: None,
            message: String::new(),
            blocker: None,
        }
    }

    /// Whether `entry` is the status entry [`Self::to_status`] makes for `pod` (without
    /// making one, but for a blocked pod, whose message is the diagnosis's text).
    pub(super) fn describes(&self, pod: &PodRef, entry: &PendingPodReason) -> bool {
        entry.namespace == pod.namespace
            && entry.name == pod.name
            && entry.reason == self.reason.as_str()
            && entry.pdb == self.pdb
            && entry.diagnosis.as_deref() == self.blocker.as_ref().map(Blocker::reason)
            && match &self.blocker {
                Some(blocker) => entry.message == blocker.to_string(),
                None => entry.message == self.message,
            }
    }

    /// The status entry for `pod`.
    pub(super) fn to_status(&self, pod: &PodRef) -> PendingPodReason {
        PendingPodReason {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            reason: self.reason.as_str().to_string(),
            pdb: self.pdb.clone(),
            // The diagnosis says more than the API's refusal (which it includes the numbers of).
            message: self
                .blocker
                .as_ref()
                .map_or_else(|| self.message.clone(), ToString::to_string),
            diagnosis: self.blocker.as_ref().map(|b| b.reason().to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decisions::SkipReason;

    #[test]
    fn a_reason_describes_its_own_status_entry_and_no_other() {
        let pod = PodRef {
            namespace: "app".into(),
            name: "web-1".into(),
        };
        let other = PodRef {
            namespace: "app".into(),
            name: "web-2".into(),
        };
        let reasons = [
            PodReason::of_action(PodAction::Evict),
            PodReason::of_action(PodAction::Wait),
            PodReason::of_reply(EvictionReply::Done),
            PodReason::of_reply(EvictionReply::Failed("boom".into())),
            PodReason::of_reply(EvictionReply::Blocked {
                pdb: Some("web".into()),
                message: "needs 2".into(),
                blocker: None,
            }),
            PodReason::of_reply(EvictionReply::Blocked {
                pdb: Some("web".into()),
                message: "needs 3".into(),
                blocker: None,
            }),
        ];
        for (i, reason) in reasons.iter().enumerate() {
            let entry = reason.to_status(&pod);
            assert!(reason.describes(&pod, &entry), "{reason:?}");
            assert!(!reason.describes(&other, &entry), "another pod: {reason:?}");
            for (j, different) in reasons.iter().enumerate() {
                if i != j {
                    assert!(
                        !different.describes(&pod, &entry),
                        "{different:?} vs {entry:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn eviction_replies_become_reasons_with_their_detail() {
        let blocked = PodReason::of_reply(EvictionReply::Blocked {
            pdb: Some("web".into()),
            message: "needs 2".into(),
            blocker: None,
        });
        assert_eq!(blocked.reason, PendingReason::BlockedByPdb);
        assert_eq!(blocked.reason.as_str(), "BlockedByPodDisruptionBudget");
        assert_eq!(
            (blocked.pdb.as_deref(), blocked.message.as_str()),
            (Some("web"), "needs 2")
        );
        let done = PodReason::of_reply(EvictionReply::Done);
        assert_eq!(
            (done.reason.as_str(), done.message.as_str()),
            ("Evicted", "eviction accepted, pod terminating")
        );
        assert_eq!(
            PodReason::of_reply(EvictionReply::Refused).reason.as_str(),
            "EvictionQueueFull"
        );
        assert_eq!(
            PodReason::of_reply(EvictionReply::TooManyPdbs {
                message: "m".into()
            })
            .reason
            .as_str(),
            "TooManyPodDisruptionBudgets"
        );
        let failed = PodReason::of_reply(EvictionReply::Failed("boom".into()));
        assert_eq!(
            (failed.reason.as_str(), failed.message.as_str()),
            ("EvictionFailed", "boom")
        );
        assert_eq!(
            PodReason::of_reply(EvictionReply::NamespaceTerminating).message,
            "the pod's namespace is terminating"
        );
    }

    #[test]
    fn unanswered_pods_wait_on_what_the_drain_does_with_them() {
        assert_eq!(
            PendingReason::of_action(PodAction::Wait).as_str(),
            "Terminating"
        );
        assert_eq!(
            PendingReason::of_action(PodAction::Delete).as_str(),
            "Deleting"
        );
        assert_eq!(
            PendingReason::of_action(PodAction::Evict).as_str(),
            "Evicting"
        );
        assert_eq!(
            PendingReason::of_action(PodAction::Skip(SkipReason::Mirror)),
            PendingReason::Evicting
        );
    }

    #[test]
    fn only_obstacles_are_not_progress() {
        assert!(PendingReason::Evicted.is_progress());
        assert!(PendingReason::Deleting.is_progress());
        assert!(!PendingReason::BlockedByPdb.is_progress());
        assert!(!PendingReason::EvictionQueueFull.is_progress());
        for reason in [
            PendingReason::Evicting,
            PendingReason::Evicted,
            PendingReason::Terminating,
            PendingReason::Deleting,
            PendingReason::BlockedByPdb,
            PendingReason::TooManyPdbs,
            PendingReason::NamespaceTerminating,
            PendingReason::EvictionQueueFull,
            PendingReason::EvictionFailed,
            PendingReason::EvictionIntercepted,
            PendingReason::LiveMigrating,
            PendingReason::VmCannotMigrate,
        ] {
            assert_eq!(
                PendingReason::text_is_progress(reason.as_str()),
                reason.is_progress(),
                "{reason:?}"
            );
        }
    }
}
