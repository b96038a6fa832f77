//! The status writer: what the status should say, what the API has, one write at a time, and
//! writes coalesced by how much the change matters.
//!
//! A phase change is written at once. A change that says something new about the maintenance
//! (an error, a blocked pod, a condition, the counts, the deadline, the queue place)
//! waits out a short window, so a burst of them costs one write. A change of progress alone
//! (the percentage, which pods are left, how long until the deadline) waits out a long one: a
//! drain of a minute writes its progress once or twice, not with every pod that leaves.
//!
//! Every write is conditional on the status as last written or read (its `statusRevision`,
//! see [`StatusPrecondition`]): a write that arrives after someone else's (a replica that lost
//! its leadership while its write was on the way) fails instead of undoing it. A refused write
//! is never forced: the status is read again ([`write`]) and the next write goes over what was
//! read. A status someone else wrote, seen in the watch, is taken as what the API has
//! ([`StatusWriter::observed`]), so the next flush puts back what this actor wants.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::drain::Drain;
use super::messages::StatusOutcome;
use super::pending::PendingReason;
use super::status::{self, InitialCounts};
use crate::config::Config;
use crate::decisions::{self, RecordFinding};
use crate::model::{
    FailureKind, MaintenanceName, MaintenanceStatus, NodeState, Phase, StatusPrecondition, Uid,
    conditions,
};
use crate::ports::{Cluster, ClusterError};
use crate::retry::Backoff;

/// What to do about the status now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flush {
    /// Nothing (nothing new, a write is out, or a deferred write is already scheduled).
    Nothing,
    /// Write after this long (a change inside its coalescing window).
    Later(Duration),
    /// Write now.
    Now,
    /// Progress alone is due: written at the drain's turn of the shared pace
    /// ([`crate::progress_pace::PaceSlot::turn`]).
    Progress,
}

/// How long after a write the next waits, by what changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Windows {
    /// For a change that says something new (not the phase: that goes at once).
    pub(super) news: Duration,
    /// For progress alone.
    pub(super) progress: Duration,
}

/// The status a node actor wants, and what the API has.
#[derive(Debug)]
pub(super) struct StatusWriter {
    /// What the status should say: changed only here, through the methods that say what
    /// happened (the shapes of those changes are in [`super::status`]).
    wanted: MaintenanceStatus,
    /// What the API has (last written or read).
    written: Option<MaintenanceStatus>,
    in_flight: bool,
    /// When the last write began.
    last_write: Option<Instant>,
    /// When the deferred write scheduled fires, if one is.
    scheduled: Option<Instant>,
    /// Failed writes in a row; after one, nothing is written before `retry_at`.
    failures: Backoff,
    retry_at: Option<Instant>,
    /// The last write was refused because the status had changed: a second refusal in a row
    /// waits out the backoff (someone keeps writing), the first is written again at once.
    refused_last: bool,
}

/// Writes `status` over `seen` to the NodeMaintenance `name` with uid `uid`; a refusal reads
/// the status again, so that the next write goes over what the API has.
pub(super) async fn write(
    cluster: &dyn Cluster,
    name: &MaintenanceName,
    uid: &Uid,
    seen: StatusPrecondition,
    status: MaintenanceStatus,
) -> StatusOutcome {
    match cluster.write_status(name, uid, seen, &status).await {
        Ok(()) => StatusOutcome::Written(status),
        Err(ClusterError::NotFound(_)) => StatusOutcome::Gone,
        Err(ClusterError::Conflict(_)) => match cluster.get_maintenance(name).await {
            Ok(Some(fresh)) if fresh.uid == *uid => StatusOutcome::Refused(fresh.status),
            Ok(_) => StatusOutcome::Gone,
            Err(error) => StatusOutcome::Failed(error),
        },
        Err(error) => StatusOutcome::Failed(error),
    }
}

/// What a status says besides its progress: a difference here is news.
#[derive(Debug, PartialEq, Eq)]
struct News<'a> {
    last_error: &'a Option<String>,
    error_on_lease_count: i32,
    total_pods: i32,
    eviction_pods: i32,
    /// Each condition's type, state, reason and message; a drain not started or under way
    /// (`NotStarted`, `PodsPending`, whose message counts the pods left) is progress.
    conditions: Vec<(&'a str, &'a str, &'a str, &'a str)>,
    /// What stands in the way of pods (not which pods, nor those simply on their way out:
    /// pods leaving is progress).
    reasons: BTreeSet<(&'a str, Option<&'a str>, Option<&'a str>)>,
    drain_start_time: Option<DateTime<Utc>>,
    drain_deadline: Option<DateTime<Utc>>,
    queue: &'a Option<crate::model::QueuePlace>,
}

impl<'a> News<'a> {
    fn of(status: &'a MaintenanceStatus) -> Self {
        News {
            last_error: &status.last_error,
            error_on_lease_count: status.error_on_lease_count,
            total_pods: status.total_pods,
            eviction_pods: status.eviction_pods,
            conditions: status
                .conditions
                .iter()
                .map(|c| {
                    let under_way = [conditions::NOT_STARTED, conditions::PODS_PENDING];
                    if under_way.contains(&c.reason.as_str()) {
                        (c.type_.as_str(), c.status.as_str(), "", "")
                    } else {
                        (
                            c.type_.as_str(),
                            c.status.as_str(),
                            c.reason.as_str(),
                            c.message.as_str(),
                        )
                    }
                })
                .collect(),
            reasons: status
                .pending_pods_reasons
                .iter()
                .filter(|r| !PendingReason::text_is_progress(&r.reason))
                .map(|r| (r.reason.as_str(), r.pdb.as_deref(), r.diagnosis.as_deref()))
                .collect(),
            drain_start_time: status.drain_start_time,
            drain_deadline: status.drain_deadline,
            queue: &status.queue,
        }
    }
}

impl StatusWriter {
    /// Starts from the status as read from the API.
    pub(super) fn new(status: Option<MaintenanceStatus>) -> Self {
        StatusWriter {
            wanted: status.clone().unwrap_or_default(),
            written: status,
            in_flight: false,
            last_write: None,
            scheduled: None,
            failures: Backoff::default(),
            retry_at: None,
            refused_last: false,
        }
    }

    /// The status as re-read from the API replaces both sides (crash safety: a restarted actor
    /// continues from what the API has, not from a stale copy).
    pub(super) fn reread(&mut self, status: Option<MaintenanceStatus>) {
        if let Some(status) = &status {
            self.wanted = status.clone();
        }
        self.written = status;
    }

    /// What the API has.
    pub(super) fn written(&self) -> Option<&MaintenanceStatus> {
        self.written.as_ref()
    }

    /// Decides (pure): a write is due when the wanted status differs from the written one in
    /// anything but `lastUpdate`; a phase change goes at once, news after `windows.news` since
    /// the last write, progress alone after `windows.progress` (and then at its turn of the
    /// shared pace). No write before the first phase, none while one is out.
    pub(super) fn decide(&self, now: Instant, windows: Windows) -> Flush {
        if self.in_flight {
            return Flush::Nothing;
        }
        if let Some(at) = self.retry_at.filter(|at| *at > now) {
            // After a failed write, even a phase change waits for the backoff.
            return match self.scheduled {
                Some(fires) if fires <= at => Flush::Nothing,
                _ => Flush::Later(at - now),
            };
        }
        let Some(written) = &self.written else {
            return match self.wanted.phase {
                Some(_) => Flush::Now,
                None => Flush::Nothing,
            };
        };
        if self.wanted.phase.is_none() || !decisions::status_differs(&self.wanted, written) {
            return Flush::Nothing;
        }
        if written.phase != self.wanted.phase {
            return Flush::Now;
        }
        let progress_alone = News::of(&self.wanted) == News::of(written);
        let window = if progress_alone {
            windows.progress
        } else {
            windows.news
        };
        let due = self
            .last_write
            .map(|at| at + window)
            .filter(|due| *due > now);
        match (due, self.scheduled) {
            (None, _) if progress_alone => Flush::Progress,
            (None, _) => Flush::Now,
            (Some(due), Some(fires)) if fires <= due => Flush::Nothing,
            (Some(due), _) => Flush::Later(due - now),
        }
    }

    /// A deferred write was scheduled to fire at `at`.
    pub(super) fn scheduled(&mut self, at: Instant) {
        self.scheduled = Some(self.scheduled.map_or(at, |fires| fires.min(at)));
    }

    /// A deferred write is due.
    pub(super) fn due(&mut self) {
        self.scheduled = None;
    }

    /// A write begins: stamps `lastUpdate` and the revision, and opens the next coalescing
    /// windows; returns the status to write and what it is conditional on (the status as the
    /// API last had it).
    pub(super) fn begin(
        &mut self,
        now: Instant,
        wall: DateTime<Utc>,
    ) -> (MaintenanceStatus, StatusPrecondition) {
        let seen = StatusPrecondition::over(self.written.as_ref());
        self.last_write = Some(now);
        self.wanted.last_update = Some(wall);
        self.wanted.revision = Some(seen.next_revision());
        self.in_flight = true;
        (self.wanted.clone(), seen)
    }

    /// The write ended; on success the API has `written`.
    pub(super) fn ended(&mut self, written: Option<MaintenanceStatus>) {
        self.in_flight = false;
        if written.is_some() {
            self.written = written;
            self.failures.succeeded();
            self.retry_at = None;
            self.refused_last = false;
        }
    }

    /// The write was refused: the API has `fresh` (as just read), which the next write goes
    /// over. Written again at once, unless the one before was refused too.
    pub(super) fn refused(
        &mut self,
        fresh: Option<MaintenanceStatus>,
        now: Instant,
        config: &Config,
    ) {
        self.in_flight = false;
        self.written = fresh;
        if std::mem::replace(&mut self.refused_last, true) {
            let delay = self
                .failures
                .failed(config.retry_backoff_base, config.retry_backoff_max);
            self.retry_at = Some(now + delay);
        }
    }

    /// The watch shows the status as `seen`: when someone else wrote it (its revision is not
    /// the one this writer last wrote, nor an older one), it is what the API has now, and true
    /// says a flush may be due. Ignored while a write is out (its outcome settles it).
    pub(super) fn observed(&mut self, seen: Option<&MaintenanceStatus>) -> bool {
        let Some(seen) = seen else {
            return false;
        };
        let known = self.written.as_ref().and_then(|w| w.revision);
        let foreign = match (seen.revision, known) {
            (Some(seen), Some(known)) => seen > known,
            (None, Some(_)) => true,
            (Some(_), None) => true,
            (None, None) => self.written.is_none(),
        };
        if self.in_flight || !foreign {
            return false;
        }
        self.written = Some(seen.clone());
        true
    }

    /// The write failed: the next one waits out a backoff growing with each failure in a row.
    pub(super) fn failed(&mut self, now: Instant, config: &Config) {
        self.in_flight = false;
        let delay = self
            .failures
            .failed(config.retry_backoff_base, config.retry_backoff_max);
        self.retry_at = Some(now + delay);
    }
}

/// What happened to the maintenance, said in the status it wants (written by
/// [`StatusWriter::decide`]'s flushes).
impl StatusWriter {
    /// What the status should say.
    pub(super) fn wanted(&self) -> &MaintenanceStatus {
        &self.wanted
    }

    /// Maintenance began: Running, with the counts taken then.
    pub(super) fn began(&mut self, initial: &InitialCounts, now: DateTime<Utc>) {
        status::begin(&mut self.wanted, initial, now);
    }

    /// The node is in maintenance with `node`'s record of its prior state (see
    /// [`status::recorded`]).
    pub(super) fn node_recorded(
        &mut self,
        node: &NodeState,
        uid: &Uid,
        finding: Option<RecordFinding>,
        now: DateTime<Utc>,
    ) {
        status::recorded(&mut self.wanted, node, uid, finding, now);
    }

    /// The node lease is nmo's.
    pub(super) fn lease_acquired(&mut self, now: DateTime<Utc>) {
        status::lease_acquired(&mut self.wanted, now);
    }

    /// Someone else holds a valid lease, `until` then.
    pub(super) fn waiting_for_lease(
        &mut self,
        holder: &str,
        until: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) {
        status::waiting_for_lease(&mut self.wanted, holder, until, now);
    }

    /// Failed, with its kind and what went wrong.
    pub(super) fn maintenance_failed(
        &mut self,
        kind: FailureKind,
        error: String,
        now: DateTime<Utc>,
    ) {
        status::fail(&mut self.wanted, kind, error, now);
    }

    /// The drain's deadline passed: Failed, with what blocked it.
    pub(super) fn drain_timed_out(&mut self, error: String, now: DateTime<Utc>) {
        status::drain_timed_out(&mut self.wanted, error, now);
    }

    /// Gave up and the node changes are to be undone (said before the undo starts).
    pub(super) fn undo_due(&mut self, now: DateTime<Utc>) {
        status::undo_due(&mut self.wanted, now);
    }

    /// A give-up's undo restored the node.
    pub(super) fn restored(&mut self, now: DateTime<Utc>) {
        status::restored(&mut self.wanted, now);
    }

    /// The phase is Running (the drain goes on, or starts).
    pub(super) fn running(&mut self) {
        self.wanted.phase = Some(Phase::Running);
    }

    /// The drain started at `now`, unless the status says it started before.
    pub(super) fn drain_started(&mut self, now: DateTime<Utc>) {
        self.wanted.drain_start_time.get_or_insert(now);
    }

    /// The drain's deadline (None: there is none) and the time left until it, as said.
    pub(super) fn drain_deadline(&mut self, due: Option<DateTime<Utc>>, left: Option<String>) {
        self.wanted.drain_deadline = due;
        self.wanted.drain_time_remaining = left;
    }

    /// The time left until the drain's deadline, as said now.
    pub(super) fn time_left(&mut self, left: String) {
        self.wanted.drain_time_remaining = Some(left);
    }

    /// What `drain` says of its pods, as of `now`; true when it is drained.
    pub(super) fn drain_progress(&mut self, drain: &Drain, now: DateTime<Utc>) -> bool {
        drain.write_status(&mut self.wanted, now)
    }

    /// The last error is `error` (None: nothing is wrong any more).
    pub(super) fn last_error(&mut self, error: Option<String>) {
        self.wanted.last_error = error;
    }

    /// Failures to take or keep the node lease in a row, as counted now; true when that
    /// changed the status.
    pub(super) fn lease_failures(&mut self, count: i32) -> bool {
        std::mem::replace(&mut self.wanted.error_on_lease_count, count) != count
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{PendingPodReason, Phase};

    fn status(phase: Phase, progress: i32) -> MaintenanceStatus {
        MaintenanceStatus {
            phase: Some(phase),
            drain_progress: progress,
            ..MaintenanceStatus::default()
        }
    }

    fn wall() -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH
    }

    const WINDOWS: Windows = Windows {
        news: Duration::from_secs(1),
        progress: Duration::from_secs(30),
    };

    fn reason(pod: &str, reason: &str) -> PendingPodReason {
        PendingPodReason {
            namespace: "ns".into(),
            name: pod.into(),
            reason: reason.into(),
            pdb: None,
            message: format!("{pod} is {reason}"),
            diagnosis: None,
        }
    }

    #[test]
    fn nothing_is_written_before_the_first_phase_or_without_a_change() {
        let now = Instant::now();
        let mut writer = StatusWriter::new(None);
        assert_eq!(writer.decide(now, WINDOWS), Flush::Nothing, "no phase yet");
        writer.wanted = status(Phase::Running, 0);
        assert_eq!(writer.decide(now, WINDOWS), Flush::Now);
        let written = writer.begin(now, wall()).0;
        assert_eq!(
            writer.decide(now, WINDOWS),
            Flush::Nothing,
            "one write at a time"
        );
        writer.ended(Some(written));
        assert_eq!(writer.decide(now, WINDOWS), Flush::Nothing, "nothing new");
    }

    #[test]
    fn progress_waits_out_the_long_window_but_a_phase_change_does_not() {
        let now = Instant::now();
        let mut writer = StatusWriter::new(Some(status(Phase::Running, 0)));
        writer.wanted.drain_progress = 10;
        let written = writer.begin(now, wall()).0;
        writer.ended(Some(written));
        writer.wanted.drain_progress = 20;
        writer.wanted.pending_pods = vec!["a".into()].into();
        let soon = now + Duration::from_millis(300);
        assert_eq!(
            writer.decide(soon, WINDOWS),
            Flush::Later(Duration::from_millis(29_700))
        );
        writer.scheduled(now + WINDOWS.progress);
        assert_eq!(
            writer.decide(soon, WINDOWS),
            Flush::Nothing,
            "already scheduled"
        );
        writer.wanted.phase = Some(Phase::Succeeded);
        assert_eq!(writer.decide(soon, WINDOWS), Flush::Now);
        writer.wanted.phase = Some(Phase::Running);
        writer.due();
        assert_eq!(
            writer.decide(now + WINDOWS.progress, WINDOWS),
            Flush::Progress,
            "progress alone, its window over: written at its turn of the shared pace"
        );
    }

    #[test]
    fn news_waits_out_the_short_window_even_with_progress_scheduled() {
        let now = Instant::now();
        let mut writer = StatusWriter::new(Some(status(Phase::Running, 0)));
        writer.wanted.pending_pods_reasons =
            vec![reason("a", "Evicting"), reason("b", "Evicting")].into();
        let written = writer.begin(now, wall()).0;
        writer.ended(Some(written));
        // Pod `a` left and `b` is terminating: progress.
        writer.wanted.pending_pods_reasons = vec![reason("b", "Terminating")].into();
        writer.wanted.drain_progress = 50;
        let soon = now + Duration::from_millis(300);
        assert_eq!(
            writer.decide(soon, WINDOWS),
            Flush::Later(Duration::from_millis(29_700))
        );
        writer.scheduled(now + WINDOWS.progress);
        // Pod `b` is now blocked by a budget: news, written within the short window.
        let mut blocked = reason("b", "BlockedByPodDisruptionBudget");
        blocked.pdb = Some("web".into());
        writer.wanted.pending_pods_reasons = vec![blocked].into();
        assert_eq!(
            writer.decide(soon, WINDOWS),
            Flush::Later(Duration::from_millis(700))
        );
        writer.scheduled(now + WINDOWS.news);
        assert_eq!(writer.decide(soon, WINDOWS), Flush::Nothing);
        writer.due();
        assert_eq!(writer.decide(now + WINDOWS.news, WINDOWS), Flush::Now);
        // A condition's message is news, but for the count of pods left (a drain that starts
        // is progress too).
        let at = now + WINDOWS.news;
        decisions::set_condition(
            &mut writer.wanted.conditions,
            conditions::DRAINED,
            false,
            conditions::NOT_STARTED,
            "the drain has not started",
            wall(),
        );
        let written = writer.begin(at, wall()).0;
        writer.ended(Some(written));
        decisions::set_condition(
            &mut writer.wanted.conditions,
            conditions::DRAINED,
            false,
            conditions::PODS_PENDING,
            "3 pods still on the node",
            wall(),
        );
        assert_eq!(writer.decide(at, WINDOWS), Flush::Later(WINDOWS.progress));
        let written = writer.begin(at, wall()).0;
        writer.ended(Some(written));
        decisions::set_condition(
            &mut writer.wanted.conditions,
            conditions::DRAINED,
            false,
            conditions::PODS_PENDING,
            "2 pods still on the node",
            wall(),
        );
        assert_eq!(writer.decide(at, WINDOWS), Flush::Later(WINDOWS.progress));
        decisions::set_condition(
            &mut writer.wanted.conditions,
            conditions::DRAIN_BLOCKED,
            true,
            "WaitingForReplacement",
            "waiting for pod shop/web-new to become ready",
            wall(),
        );
        assert_eq!(writer.decide(at, WINDOWS), Flush::Later(WINDOWS.news));
        // An error is news too.
        let written = writer.begin(now + WINDOWS.news, wall()).0;
        writer.ended(Some(written));
        writer.wanted.last_error = Some("cannot evict".into());
        assert_eq!(
            writer.decide(now + WINDOWS.news, WINDOWS),
            Flush::Later(WINDOWS.news)
        );
    }

    #[test]
    fn a_failed_write_keeps_what_the_api_had() {
        let now = Instant::now();
        let mut writer = StatusWriter::new(Some(status(Phase::Running, 0)));
        writer.wanted.drain_progress = 50;
        writer.begin(now, wall());
        writer.ended(None);
        assert_eq!(writer.written().map(|w| w.drain_progress), Some(0));
        let retry = now + WINDOWS.progress;
        assert_eq!(
            writer.decide(retry, WINDOWS),
            Flush::Progress,
            "retried, at its turn"
        );
    }

    fn config() -> Config {
        Config {
            retry_backoff_base: Duration::from_secs(1),
            retry_backoff_max: Duration::from_secs(8),
            ..Config::default()
        }
    }

    #[test]
    fn each_write_goes_over_the_revision_last_written() {
        let now = Instant::now();
        let mut writer = StatusWriter::new(None);
        writer.wanted = status(Phase::Running, 0);
        let (first, seen) = writer.begin(now, wall());
        assert_eq!(seen, StatusPrecondition::Absent);
        assert_eq!(first.revision, Some(1));
        writer.ended(Some(first));
        writer.wanted.phase = Some(Phase::Succeeded);
        let (second, seen) = writer.begin(now, wall());
        assert_eq!(seen, StatusPrecondition::Revision(Some(1)));
        assert_eq!(second.revision, Some(2));
    }

    #[test]
    fn a_refused_write_goes_again_over_the_status_read_and_twice_refused_waits() {
        let now = Instant::now();
        let mut writer = StatusWriter::new(Some(status(Phase::Running, 0)));
        writer.wanted.phase = Some(Phase::Succeeded);
        writer.begin(now, wall());
        let mut theirs = status(Phase::Running, 60);
        theirs.revision = Some(5);
        writer.refused(Some(theirs.clone()), now, &config());
        assert_eq!(writer.written(), Some(&theirs));
        assert_eq!(
            writer.decide(now, WINDOWS),
            Flush::Now,
            "written again at once"
        );
        let (again, seen) = writer.begin(now, wall());
        assert_eq!(seen, StatusPrecondition::Revision(Some(5)));
        assert_eq!(
            again.phase,
            Some(Phase::Succeeded),
            "what this writer wants"
        );
        writer.refused(Some(theirs), now, &config());
        assert!(
            matches!(writer.decide(now, WINDOWS), Flush::Later(_)),
            "a second refusal in a row waits out the backoff"
        );
    }

    #[test]
    fn a_status_someone_else_wrote_is_what_the_api_has() {
        let now = Instant::now();
        let mut writer = StatusWriter::new(None);
        writer.wanted = status(Phase::Succeeded, 100);
        let written = writer.begin(now, wall()).0;
        writer.ended(Some(written.clone()));
        assert!(!writer.observed(Some(&written)), "its own write");
        let mut older = written.clone();
        older.revision = Some(0);
        assert!(
            !writer.observed(Some(&older)),
            "an older one, delivered late by the watch"
        );
        let mut late = status(Phase::Running, 60);
        late.revision = Some(2);
        assert!(
            writer.observed(Some(&late)),
            "a newer one is someone else's"
        );
        assert_eq!(writer.written(), Some(&late));
        assert_eq!(
            writer.decide(now, WINDOWS),
            Flush::Now,
            "and is written over"
        );
        writer.begin(now, wall());
        let mut later = late.clone();
        later.revision = Some(3);
        assert!(!writer.observed(Some(&later)), "not while a write is out");
    }
}
