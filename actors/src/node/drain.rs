//! The drain of one maintenance: the node's pods as last seen, those still pending, which the
//! eviction actor holds, and why each is still there. Decisions only; the node actor sends the
//! eviction requests and the status.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::blocked::{self, Blockage, Change};
use super::drain_deadline::DrainDeadline;
use super::errors::DrainError;
use super::observed::Observed;
use super::ops::{DaemonSets, DrainPass, classify_known};
use super::pending::{PendingPod, PendingReason, PodReason};
use super::reasons::Reasons;
use super::status;
use crate::decisions::PodAction;
use crate::diagnosis::Blocker;
use crate::eviction::{EvictionReply, EvictionReport};
use crate::model::{MaintenanceStatus, NodeReady, PodInfo, PodList, PodRef, Uid, VmList};

/// The hasher of the sets a drain pass fills and looks up for each pod: foldhash, not std's
/// SipHash, whose hashing of pod names was most of a pass's time at b2000. The names come from
/// the API server, not from someone choosing collisions.
type FastHash = foldhash::fast::RandomState;

/// A set a drain pass looks pods up in (see [`FastHash`]).
pub(super) type Hashed<T> = HashSet<T, FastHash>;

/// A pod as one allocation of the pod watch: the watch shares a pod that did not change, so
/// the same allocation means the same pod in the same state.
#[derive(Debug, Clone)]
struct SamePod(Arc<PodInfo>);

impl PartialEq for SamePod {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SamePod {}

impl std::hash::Hash for SamePod {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.0).hash(state);
    }
}

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DrainEnd {
    /// Every evictable pod is gone.
    Drained,
    /// Stopped before (deleted, failed).
    Stopped,
}

/// One drain, from cordon to the last pod gone.
#[derive(Debug)]
pub(super) struct Drain {
    /// The pod watch's latest list (None until its first snapshot, or without a watch).
    pods: Option<PodList>,
    /// The last pass's pending pods and their actions.
    pending: Vec<PendingPod>,
    /// Every pod the last pass classified, with its action (None before the first pass).
    passed: Option<HashMap<SamePod, PodAction, FastHash>>,
    /// Uids of pods whose eviction was accepted or which were deleted: a watch snapshot that
    /// still shows them (it may lag) must not cause a second call.
    handled: Hashed<Uid>,
    /// Pods handed to the eviction actor and not finally answered, with the uid each request
    /// named.
    asked: HashMap<PodRef, Uid, FastHash>,
    /// Requests to withdraw from the eviction actor: their pod left the node, or its name now
    /// belongs to another pod (see [`Drain::take_withdrawn`]).
    withdrawn: Vec<(PodRef, Uid)>,
    /// Pods the eviction actor refused (its queue was full): asked again on the retry tick,
    /// not on every change of the node's pods, which only brought another refusal.
    refused: Hashed<PodRef>,
    reasons: BTreeMap<PodRef, PodReason>,
    /// What the drain observes on its own (the node's readiness), and the reasons it gives.
    observed: Observed,
    errors: Vec<DrainError>,
    /// The drain's span: parent of every eviction attempt and pod deletion.
    span: tracing::Span,
    began: Instant,
    /// Whether (and since when, by what) the drain is blocked.
    blockage: Blockage,
    /// When `spec.drainTimeout` passes, if set (its timer is aborted with the drain).
    deadline: Option<DrainDeadline>,
}

impl Drain {
    /// Begins a drain of `to_evict` pods under the maintenance's span.
    pub(super) fn begin(parent: &tracing::Span, to_evict: i32) -> Self {
        let span = tracing::info_span!(
            parent: parent,
            "drain",
            nmo.pods_to_evict = to_evict,
            nmo.outcome = tracing::field::Empty,
            nmo.blocked_reason = tracing::field::Empty,
            nmo.blocked_message = tracing::field::Empty,
        );
        Drain {
            pods: None,
            pending: Vec::new(),
            passed: None,
            handled: Hashed::default(),
            asked: HashMap::default(),
            withdrawn: Vec::new(),
            refused: Hashed::default(),
            reasons: BTreeMap::new(),
            observed: Observed::default(),
            errors: Vec::new(),
            span,
            began: Instant::now(),
            blockage: Blockage::default(),
            deadline: None,
        }
    }

    /// What blocks the drain as a whole (the most severe of its pods' blockers), with its pod.
    pub(super) fn blocker(&self) -> Option<(&PodRef, &Blocker)> {
        blocked::worst(&self.pending, self.all_reasons())
    }

    /// Takes in what blocks the drain now; a change is recorded on the drain's span (as its
    /// attributes, and as an event so the trace keeps the history).
    pub(super) fn note_blockage(&mut self, now: DateTime<Utc>) -> Change {
        let current = self.blocker().map(|(pod, b)| (pod.clone(), b.clone()));
        let change = self.blockage.update(current.as_ref().map(|(_, b)| b), now);
        if change.changed {
            match &current {
                Some((pod, blocker)) => {
                    let message = format!("pod {}/{}: {blocker}", pod.namespace, pod.name);
                    self.span.record("nmo.blocked_reason", blocker.reason());
                    self.span.record("nmo.blocked_message", message.as_str());
                    self.span.in_scope(|| {
                        tracing::info!(reason = blocker.reason(), detail = %message, "drain blocked");
                    });
                }
                None => self
                    .span
                    .in_scope(|| tracing::info!("drain no longer blocked")),
            }
        }
        change
    }

    /// The pods' reasons: the drain's observations over the eviction actor's answers.
    fn all_reasons(&self) -> Reasons<'_> {
        Reasons::overlaid(&self.reasons, self.observed.reasons())
    }

    /// Takes in the node `name`'s `Ready` condition; true when it changes what the status
    /// says.
    pub(super) fn node_ready(&mut self, name: &str, ready: &NodeReady) -> bool {
        if !self.observed.node_ready(name, ready) {
            return false;
        }
        self.observed.refresh(&self.pending);
        true
    }

    /// Takes in the VMIs on the node; true when it changes what the status says.
    pub(super) fn vms(&mut self, vms: VmList) -> bool {
        if !self.observed.vms(vms) {
            return false;
        }
        self.observed.refresh(&self.pending);
        true
    }

    /// Whether a KubeVirt launcher pod is still pending (its VM's state is worth watching).
    pub(super) fn has_launcher_pods(&self) -> bool {
        self.pending
            .iter()
            .any(|p| crate::interception::pod_is_virt_launcher(&p.source))
    }

    /// How many pods are still pending.
    pub(super) fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// The drain's span.
    pub(super) fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// Whether the drain has no list of the node's pods yet (the pod watch will bring one).
    pub(super) fn awaiting_pods(&self) -> bool {
        self.pods.is_none()
    }

    /// The pod watch lists the node's pods as `pods` now (None: it has not listed them yet).
    pub(super) fn pods_listed(&mut self, pods: Option<PodList>) {
        self.pods = pods;
    }

    /// Takes in the watch's latest list of the node's pods without a pass, if it has one and
    /// no call is needed (see [`Self::take_without_pass`]).
    pub(super) fn take_latest_without_pass(
        &mut self,
        known: &DaemonSets,
    ) -> Option<Vec<PendingPod>> {
        // Out for the call, which changes the drain while reading the list.
        let pods = self.pods.take();
        let taken = pods
            .as_ref()
            .and_then(|pods| self.take_without_pass(pods, known));
        self.pods = pods;
        taken
    }

    /// When `spec.drainTimeout` passes, if it is set.
    pub(super) fn deadline(&self) -> Option<&DrainDeadline> {
        self.deadline.as_ref()
    }

    /// The drain's deadline is `deadline` now (None: no timeout).
    pub(super) fn set_deadline(&mut self, deadline: Option<DrainDeadline>) {
        self.deadline = deadline;
    }

    /// The pods to classify next (the watch's latest list, None = list them) and the uids
    /// already handled.
    pub(super) fn next_pass(&self) -> (Option<PodList>, Hashed<Uid>) {
        (self.pods.clone(), self.handled.clone())
    }

    /// Takes in the node's pods as the watch now lists them without a pass, when no call is
    /// needed to classify them: a pod unchanged since the last pass (the same allocation)
    /// keeps its action, any other is classified from the DaemonSets `known`. Returns the pods
    /// to ask the eviction actor for, as [`Drain::apply`] does. None when a pass must run: no
    /// pass yet, the last one had errors, a pod needs a DaemonSet lookup or a deletion (both
    /// calls). At 2,000 nodes, where evictions are paced and each node loses its pods one or
    /// two at a time (each first turns terminating, then goes), this saves most passes, each a
    /// task, a classification of every pod and a message back.
    pub(super) fn take_without_pass(
        &mut self,
        pods: &PodList,
        known: &DaemonSets,
    ) -> Option<Vec<PendingPod>> {
        let passed = self.passed.as_ref()?;
        if !self.errors.is_empty() {
            return None;
        }
        let mut classified = Vec::with_capacity(pods.len());
        for pod in pods {
            let action = match passed.get(&SamePod(Arc::clone(pod))) {
                Some(action) => *action,
                None => classify_known(pod, known)?,
            };
            if action == PodAction::Delete && !self.handled.contains(&pod.uid) {
                return None;
            }
            classified.push((Arc::clone(pod), action));
        }
        Some(self.apply(DrainPass {
            pods: classified,
            ..DrainPass::default()
        }))
    }

    /// Takes in a pass; returns the pods to ask the eviction actor for (to evict, not asked
    /// yet, not already handled).
    pub(super) fn apply(&mut self, pass: DrainPass) -> Vec<PendingPod> {
        self.errors = pass.errors;
        self.handled.extend(pass.deleted);
        self.passed = Some(
            pass.pods
                .iter()
                .map(|(pod, action)| (SamePod(Arc::clone(pod)), *action))
                .collect(),
        );
        // Passes (and changes taken in without one) come often, and most pods are as they were: a
        // pod that is the same allocation as last pass (the pod watch shares unchanged pods)
        // with the same action keeps its entry instead of a fresh copy of its names.
        let mut before: HashMap<SamePod, PendingPod, FastHash> = std::mem::take(&mut self.pending)
            .into_iter()
            .map(|p| (SamePod(Arc::clone(&p.source)), p))
            .collect();
        self.pending = pass
            .pods
            .iter()
            .filter(|(_, action)| action.is_pending())
            .map(
                |(pod, action)| match before.remove(&SamePod(Arc::clone(pod))) {
                    Some(kept) if kept.action == *action => kept,
                    _ => PendingPod::of(pod, *action),
                },
            )
            .collect();
        let uids: Hashed<&Uid> = pass.pods.iter().map(|(p, _)| &p.uid).collect();
        self.handled.retain(|uid| uids.contains(uid));
        self.settle()
    }

    /// Forgets what was asked about pods no longer pending, and withdraws their requests (a
    /// request the eviction actor kept would be sent when its budget allows, to whatever pod
    /// has the name by then); returns the pending pods to ask the eviction actor for (to evict,
    /// not asked yet, not already handled).
    fn settle(&mut self) -> Vec<PendingPod> {
        let present: HashMap<&PodRef, &Uid, FastHash> =
            self.pending.iter().map(|p| (&p.pod, &p.uid)).collect();
        let withdrawn = &mut self.withdrawn;
        self.asked.retain(|pod, uid| {
            let same = present.get(pod).is_some_and(|now| *now == uid);
            if !same {
                withdrawn.push((pod.clone(), uid.clone()));
            }
            same
        });
        self.refused.retain(|p| present.contains_key(p));
        self.reasons.retain(|p, _| present.contains_key(p));
        self.observed.refresh(&self.pending);
        self.pending
            .iter()
            .filter(|p| {
                p.action == PodAction::Evict
                    && !self.asked.contains_key(&p.pod)
                    && !self.refused.contains(&p.pod)
                    && !self.handled.contains(&p.uid)
            })
            .cloned()
            .collect()
    }

    /// The eviction actor dropped every request of this drain (evictions paused): they are
    /// asked for again once evictions resume.
    pub(super) fn forget_asked(&mut self) {
        self.asked.clear();
        self.withdrawn.clear();
    }

    /// The requests to withdraw from the eviction actor (their pod with that uid left the
    /// node), taken out.
    pub(super) fn take_withdrawn(&mut self) -> Vec<(PodRef, Uid)> {
        std::mem::take(&mut self.withdrawn)
    }

    /// The retry tick: pods the eviction actor refused are asked for again by the next pass.
    pub(super) fn retry_refused(&mut self) {
        self.refused.clear();
    }

    /// The eviction actor took the request for `pod`.
    pub(super) fn asked(&mut self, pod: &PendingPod) {
        self.asked.insert(pod.pod.clone(), pod.uid.clone());
    }

    /// An answer of the eviction actor; true when it changes what the status says. An answer
    /// about another pod of the name (one that left) changes nothing.
    pub(super) fn report(&mut self, report: EvictionReport) -> bool {
        let EvictionReport { pod, uid, reply } = report;
        let Some(pending) = self.pending.iter().find(|p| p.pod == pod && p.uid == uid) else {
            return false;
        };
        if reply.is_final() {
            self.asked.remove(&pod);
        }
        if reply == EvictionReply::Refused {
            self.refused.insert(pod.clone());
        }
        let reason = PodReason::of_reply(reply);
        if reason.reason == PendingReason::Evicted {
            self.handled.insert(pending.uid.clone());
        }
        self.reasons.insert(pod, reason);
        true
    }

    /// Writes the drain's fields into `status`; true when the node is drained.
    pub(super) fn write_status(&self, status: &mut MaintenanceStatus, now: DateTime<Utc>) -> bool {
        status::drain(status, &self.pending, self.all_reasons(), &self.errors, now)
    }

    /// Ends the drain, recording how in its span; returns whether the eviction actor still
    /// holds requests of it (to cancel).
    pub(super) fn end(self, how: DrainEnd, observer: &dyn crate::observe::Observer) -> bool {
        match how {
            DrainEnd::Drained => {
                self.span.record("nmo.outcome", "drained");
                observer.drain_finished(self.began.elapsed());
            }
            DrainEnd::Stopped => {
                self.span.record("nmo.outcome", "stopped");
            }
        }
        !self.asked.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> Arc<PodInfo> {
        Arc::new(PodInfo::test("app", name).unmanaged())
    }

    fn pass(pods: &[(&str, PodAction)]) -> DrainPass {
        DrainPass {
            pods: pods.iter().map(|(n, a)| (pod(n), *a)).collect(),
            ..DrainPass::default()
        }
    }

    /// A pass over these very pods (the same allocations).
    fn pass_of(pods: &[(&Arc<PodInfo>, PodAction)]) -> DrainPass {
        DrainPass {
            pods: pods.iter().map(|(p, a)| (Arc::clone(p), *a)).collect(),
            ..DrainPass::default()
        }
    }

    /// A pod list of these very pods.
    fn list(pods: &[&Arc<PodInfo>]) -> PodList {
        pods.iter().map(|p| Arc::clone(p)).collect()
    }

    fn report(name: &str, reply: EvictionReply) -> EvictionReport {
        let pod = pod(name);
        EvictionReport {
            pod: pod.pod_ref(),
            uid: pod.uid.clone(),
            reply,
        }
    }

    fn names(pods: &[PendingPod]) -> Vec<&str> {
        pods.iter().map(|p| &*p.pod.name).collect()
    }

    #[test]
    fn only_pods_to_evict_are_asked_for_and_only_once() {
        let mut drain = Drain::begin(&tracing::Span::none(), 3);
        let first = pass(&[
            ("a", PodAction::Evict),
            ("b", PodAction::Wait),
            ("c", PodAction::Delete),
        ]);
        let ask = drain.apply(first);
        assert_eq!(names(&ask), ["a"]);
        drain.asked(&ask[0]);
        let again = drain.apply(pass(&[("a", PodAction::Evict), ("b", PodAction::Wait)]));
        assert!(again.is_empty(), "already asked");
    }

    #[test]
    fn an_accepted_eviction_is_not_asked_again_while_the_watch_lags() {
        let mut drain = Drain::begin(&tracing::Span::none(), 1);
        let ask = drain.apply(pass(&[("a", PodAction::Evict)]));
        drain.asked(&ask[0]);
        assert!(drain.report(report("a", EvictionReply::Done)));
        let again = drain.apply(pass(&[("a", PodAction::Evict)]));
        assert!(again.is_empty(), "handled: the snapshot is stale");
    }

    #[test]
    fn a_request_whose_pod_left_or_changed_uid_is_withdrawn_and_the_new_pod_asked() {
        let mut drain = Drain::begin(&tracing::Span::none(), 2);
        for p in drain.apply(pass(&[("a", PodAction::Evict), ("b", PodAction::Evict)])) {
            drain.asked(&p);
        }
        assert!(drain.take_withdrawn().is_empty());
        // `a` left the node; `b` was deleted and created again (same name, new uid).
        let b_again = Arc::new(PodInfo {
            uid: "uid-b-again".into(),
            ..(*pod("b")).clone()
        });
        let ask = drain.apply(pass_of(&[(&b_again, PodAction::Evict)]));
        let mut withdrawn = drain.take_withdrawn();
        withdrawn.sort();
        assert_eq!(
            withdrawn,
            [
                (pod("a").pod_ref(), Uid::from("uid-app-a")),
                (pod("b").pod_ref(), Uid::from("uid-app-b"))
            ]
        );
        assert_eq!(names(&ask), ["b"], "the new b is a pod of its own");
        assert_eq!(ask[0].uid, "uid-b-again");
        // A late answer about the old b changes nothing of the new one.
        assert!(!drain.report(report("b", EvictionReply::Done)));
    }

    #[test]
    fn a_failed_call_is_asked_again_on_the_next_pass_but_a_blocked_one_is_held() {
        let mut drain = Drain::begin(&tracing::Span::none(), 2);
        for p in drain.apply(pass(&[("a", PodAction::Evict), ("b", PodAction::Evict)])) {
            drain.asked(&p);
        }
        drain.report(report("a", EvictionReply::Failed("timeout".into())));
        drain.report(report(
            "b",
            EvictionReply::Blocked {
                pdb: Some("web".into()),
                message: "needs 2".into(),
                blocker: None,
            },
        ));
        let again = drain.apply(pass(&[("a", PodAction::Evict), ("b", PodAction::Evict)]));
        assert_eq!(names(&again), ["a"]);
    }

    #[test]
    fn a_pod_refused_by_a_full_queue_is_asked_again_on_the_retry_tick_only() {
        let mut drain = Drain::begin(&tracing::Span::none(), 2);
        for p in drain.apply(pass(&[("a", PodAction::Evict), ("b", PodAction::Evict)])) {
            drain.asked(&p);
        }
        drain.report(report("a", EvictionReply::Refused));
        let again = drain.apply(pass(&[("a", PodAction::Evict), ("b", PodAction::Evict)]));
        assert!(
            again.is_empty(),
            "the queue was full a moment ago: {:?}",
            names(&again)
        );
        drain.retry_refused();
        let again = drain.apply(pass(&[("a", PodAction::Evict), ("b", PodAction::Evict)]));
        assert_eq!(names(&again), ["a"]);
    }

    #[test]
    fn a_pod_unchanged_since_the_last_pass_keeps_its_entry_and_a_changed_one_is_read_again() {
        let mut drain = Drain::begin(&tracing::Span::none(), 1);
        let first = pod("a");
        drain.apply(pass_of(&[(&first, PodAction::Evict)]));
        drain.apply(pass_of(&[(&first, PodAction::Evict)]));
        assert!(Arc::ptr_eq(&drain.pending[0].source, &first));

        let changed = Arc::new(PodInfo {
            grace_period_seconds: Some(5),
            ..(*first).clone()
        });
        drain.apply(pass_of(&[(&changed, PodAction::Evict)]));
        assert_eq!(drain.pending[0].grace, Some(5), "the newer pod is read");
        drain.apply(pass_of(&[(&changed, PodAction::Wait)]));
        assert_eq!(
            drain.pending[0].action,
            PodAction::Wait,
            "a new action is taken"
        );
    }

    #[test]
    fn pod_changes_that_need_no_call_are_taken_in_without_a_pass() {
        let mut drain = Drain::begin(&tracing::Span::none(), 3);
        let known = DaemonSets::default();
        let (a, b, c, ds) = (pod("a"), pod("b"), pod("c"), pod("ds"));
        assert!(
            drain.take_without_pass(&list(&[&a]), &known).is_none(),
            "no pass yet"
        );
        let first = pass_of(&[
            (&a, PodAction::Evict),
            (&b, PodAction::Evict),
            (&c, PodAction::Evict),
            (
                &ds,
                PodAction::Skip(crate::decisions::SkipReason::DaemonSet),
            ),
        ]);
        for p in drain.apply(first) {
            drain.asked(&p);
        }
        drain.report(report("c", EvictionReply::Failed("timeout".into())));

        // b left, a turned terminating, a new pod came: no call needed.
        let terminating = Arc::new(PodInfo {
            terminating: true,
            ..(*a).clone()
        });
        let new = pod("new");
        let ask = drain
            .take_without_pass(&list(&[&terminating, &c, &ds, &new]), &known)
            .expect("nothing to look up or delete");
        assert_eq!(names(&drain.pending), ["a", "c", "new"]);
        assert_eq!(drain.pending[0].action, PodAction::Wait);
        assert_eq!(
            names(&ask),
            ["c", "new"],
            "the pod whose call failed is asked again, the new one asked, as a pass would"
        );
        for p in ask {
            drain.asked(&p);
        }
        let ask = drain
            .take_without_pass(&list(&[&ds]), &known)
            .expect("the rest left");
        assert!(ask.is_empty() && drain.pending.is_empty());
        let mut status = MaintenanceStatus::default();
        assert!(
            drain.write_status(&mut status, DateTime::<Utc>::UNIX_EPOCH),
            "drained"
        );
    }

    #[test]
    fn a_pod_that_needs_a_lookup_or_a_deletion_gets_a_pass() {
        let mut drain = Drain::begin(&tracing::Span::none(), 1);
        let a = pod("a");
        drain.apply(pass_of(&[(&a, PodAction::Evict)]));
        let mut known = DaemonSets::default();
        let agent = Arc::new(PodInfo::test("app", "agent-x").controlled_by("DaemonSet", "agent"));
        let with_agent = list(&[&a, &agent]);
        assert!(
            drain.take_without_pass(&with_agent, &known).is_none(),
            "a DaemonSet not known yet: look it up"
        );
        let agent_ref = crate::decisions::daemonset_ref(&agent).expect("a DaemonSet pod");
        known.learn(agent_ref.clone(), false);
        let asked = drain
            .take_without_pass(&with_agent, &known)
            .expect("an orphan is evicted: no call of the pass's");
        assert!(
            asked.iter().any(|p| &*p.pod.name == "agent-x"),
            "the orphan is asked for"
        );
        let mut drain = Drain::begin(&tracing::Span::none(), 1);
        drain.apply(pass_of(&[(&a, PodAction::Evict)]));
        known.learn(agent_ref, true);
        assert!(
            drain.take_without_pass(&with_agent, &known).is_some(),
            "a managed one stays"
        );
        let finished = Arc::new(PodInfo {
            phase: crate::model::PodPhase::Succeeded,
            ..(*a).clone()
        });
        assert!(
            drain
                .take_without_pass(&list(&[&finished]), &known)
                .is_none(),
            "a finished pod is deleted"
        );
    }

    #[test]
    fn after_a_pass_with_errors_every_change_gets_a_pass() {
        let mut drain = Drain::begin(&tracing::Span::none(), 1);
        let a = pod("a");
        let mut failed = pass_of(&[(&a, PodAction::Delete)]);
        failed.errors = vec![DrainError::ListPods(crate::ports::ClusterError::Transient(
            "x".into(),
        ))];
        drain.apply(failed);
        assert!(
            drain
                .take_without_pass(&list(&[&a]), &DaemonSets::default())
                .is_none()
        );
    }

    #[test]
    fn reports_for_pods_no_longer_pending_change_nothing() {
        let mut drain = Drain::begin(&tracing::Span::none(), 1);
        drain.apply(pass(&[("a", PodAction::Evict)]));
        assert!(!drain.report(report("gone", EvictionReply::Done)));
    }

    #[test]
    fn the_status_shows_the_reasons_and_success_at_the_end() {
        let mut drain = Drain::begin(&tracing::Span::none(), 1);
        drain.apply(pass(&[("a", PodAction::Evict)]));
        drain.report(report(
            "a",
            EvictionReply::Blocked {
                pdb: Some("web".into()),
                message: "needs 2".into(),
                blocker: None,
            },
        ));
        let mut status = MaintenanceStatus {
            eviction_pods: 1,
            ..MaintenanceStatus::default()
        };
        assert!(!drain.write_status(&mut status, DateTime::<Utc>::UNIX_EPOCH));
        assert_eq!(
            status.pending_pods_reasons[0].reason,
            "BlockedByPodDisruptionBudget"
        );
        drain.apply(pass(&[]));
        assert!(drain.write_status(&mut status, DateTime::<Utc>::UNIX_EPOCH));
        assert!(status.pending_pods_reasons.is_empty());
    }

    #[test]
    fn ending_says_whether_requests_are_still_held() {
        let observer = crate::observe::NoopObserver;
        let mut drain = Drain::begin(&tracing::Span::none(), 1);
        let ask = drain.apply(pass(&[("a", PodAction::Evict)]));
        drain.asked(&ask[0]);
        assert!(drain.end(DrainEnd::Stopped, &observer));
        let drain = Drain::begin(&tracing::Span::none(), 0);
        assert!(!drain.end(DrainEnd::Drained, &observer));
    }
}
