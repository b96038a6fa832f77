//! The status writer: what the status should say, what the API has, one write at a time, and
//! writes coalesced by how much the change matters.
//!
//! A phase change is written at once. A change that says something new about the maintenance
//! (an error, a blocked pod, a condition, the counts, the deadline, the queue place)
//! waits out a short window, so a burst of them costs one write. A change of progress alone
//! (the percentage, which pods are left, how long until the deadline) waits out a long one: a
//! drain of a minute writes its progress once or twice, not with every pod that leaves.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::pending::PendingReason;
use crate::config::Config;
use crate::decisions;
use crate::model::{MaintenanceStatus, conditions};
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
    /// What the status should say.
    pub(super) wanted: MaintenanceStatus,
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
    /// the last write, progress alone after `windows.progress`. No write before the first
    /// phase, none while one is out.
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
        let window = if News::of(&self.wanted) == News::of(written) {
            windows.progress
        } else {
            windows.news
        };
        let due = self
            .last_write
            .map(|at| at + window)
            .filter(|due| *due > now);
        match (due, self.scheduled) {
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

    /// A write begins: stamps `lastUpdate` and opens the next coalescing windows; returns the
    /// status to write.
    pub(super) fn begin(&mut self, now: Instant, wall: DateTime<Utc>) -> MaintenanceStatus {
        self.last_write = Some(now);
        self.wanted.last_update = Some(wall);
        self.in_flight = true;
        self.wanted.clone()
    }

    /// The write ended; on success the API has `written`.
    pub(super) fn ended(&mut self, written: Option<MaintenanceStatus>) {
        self.in_flight = false;
        if written.is_some() {
            self.written = written;
            self.failures.succeeded();
            self.retry_at = None;
        }
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
        let written = writer.begin(now, wall());
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
        let written = writer.begin(now, wall());
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
        assert_eq!(writer.decide(now + WINDOWS.progress, WINDOWS), Flush::Now);
    }

    #[test]
    fn news_waits_out_the_short_window_even_with_progress_scheduled() {
        let now = Instant::now();
        let mut writer = StatusWriter::new(Some(status(Phase::Running, 0)));
        writer.wanted.pending_pods_reasons =
            vec![reason("a", "Evicting"), reason("b", "Evicting")].into();
        let written = writer.begin(now, wall());
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
        let written = writer.begin(at, wall());
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
        let written = writer.begin(at, wall());
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
        let written = writer.begin(now + WINDOWS.news, wall());
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
        assert_eq!(writer.decide(retry, WINDOWS), Flush::Now, "retried");
    }
}
