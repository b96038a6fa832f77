//! The status writer: what the status should say, what the API has, one write at a time, and
//! progress-only writes coalesced (a burst of pods leaving costs one write, not one per pod).

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::config::Config;
use crate::model::MaintenanceStatus;
use crate::plan;
use crate::retry::Backoff;

/// What to do about the status now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flush {
    /// Nothing (nothing new, a write is out, or a deferred write is already scheduled).
    Nothing,
    /// Write after this long (a progress-only change inside the coalescing window).
    Later(Duration),
    /// Write now.
    Now,
}

/// The status a node actor wants, and what the API has.
#[derive(Debug)]
pub(super) struct StatusWriter {
    /// What the status should say.
    pub(super) wanted: MaintenanceStatus,
    /// What the API has (last written or read).
    written: Option<MaintenanceStatus>,
    in_flight: bool,
    /// Until when progress-only writes wait.
    hold_until: Option<Instant>,
    /// A deferred write is scheduled.
    scheduled: bool,
    /// Failed writes in a row; after one, nothing is written before `retry_at`.
    failures: Backoff,
    retry_at: Option<Instant>,
}

impl StatusWriter {
    /// Starts from the status as read from the API.
    pub(super) fn new(status: Option<MaintenanceStatus>) -> Self {
        StatusWriter {
            wanted: status.clone().unwrap_or_default(),
            written: status,
            in_flight: false,
            hold_until: None,
            scheduled: false,
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
    /// anything but `lastUpdate`; a phase change goes at once, a progress-only change waits out
    /// the coalescing window. No write before the first phase, none while one is out.
    pub(super) fn decide(&self, now: Instant) -> Flush {
        if self.in_flight {
            return Flush::Nothing;
        }
        if let Some(at) = self.retry_at.filter(|at| *at > now) {
            // After a failed write, even a phase change waits for the backoff.
            return if self.scheduled {
                Flush::Nothing
            } else {
                Flush::Later(at - now)
            };
        }
        let differs = self
            .written
            .as_ref()
            .is_none_or(|w| plan::status_differs(&self.wanted, w));
        if !differs || self.wanted.phase.is_none() {
            return Flush::Nothing;
        }
        let phase_changes = self.written.as_ref().map(|w| w.phase) != Some(self.wanted.phase);
        match self.hold_until.filter(|until| *until > now) {
            Some(_) if phase_changes => Flush::Now,
            Some(_) if self.scheduled => Flush::Nothing,
            Some(until) => Flush::Later(until - now),
            None => Flush::Now,
        }
    }

    /// A deferred write was scheduled.
    pub(super) fn scheduled(&mut self) {
        self.scheduled = true;
    }

    /// The deferred write is due.
    pub(super) fn due(&mut self) {
        self.scheduled = false;
    }

    /// A write begins: stamps `lastUpdate` and opens the next coalescing window; returns the
    /// status to write.
    pub(super) fn begin(
        &mut self,
        now: Instant,
        wall: DateTime<Utc>,
        coalesce: Duration,
    ) -> MaintenanceStatus {
        self.hold_until = Some(now + coalesce);
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
    use crate::model::Phase;

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

    #[test]
    fn nothing_is_written_before_the_first_phase_or_without_a_change() {
        let now = Instant::now();
        let mut writer = StatusWriter::new(None);
        assert_eq!(writer.decide(now), Flush::Nothing, "no phase yet");
        writer.wanted = status(Phase::Running, 0);
        assert_eq!(writer.decide(now), Flush::Now);
        let written = writer.begin(now, wall(), Duration::from_secs(1));
        assert_eq!(writer.decide(now), Flush::Nothing, "one write at a time");
        writer.ended(Some(written));
        assert_eq!(writer.decide(now), Flush::Nothing, "nothing new");
    }

    #[test]
    fn progress_waits_out_the_window_but_a_phase_change_does_not() {
        let now = Instant::now();
        let window = Duration::from_secs(1);
        let mut writer = StatusWriter::new(Some(status(Phase::Running, 0)));
        writer.wanted.drain_progress = 10;
        let written = writer.begin(now, wall(), window);
        writer.ended(Some(written));
        writer.wanted.drain_progress = 20;
        let soon = now + Duration::from_millis(300);
        assert_eq!(
            writer.decide(soon),
            Flush::Later(Duration::from_millis(700))
        );
        writer.scheduled();
        assert_eq!(writer.decide(soon), Flush::Nothing, "already scheduled");
        writer.wanted.phase = Some(Phase::Succeeded);
        assert_eq!(writer.decide(soon), Flush::Now);
        writer.wanted.phase = Some(Phase::Running);
        writer.due();
        assert_eq!(writer.decide(now + window), Flush::Now);
    }

    #[test]
    fn a_failed_write_keeps_what_the_api_had() {
        let now = Instant::now();
        let mut writer = StatusWriter::new(Some(status(Phase::Running, 0)));
        writer.wanted.drain_progress = 50;
        writer.begin(now, wall(), Duration::ZERO);
        writer.ended(None);
        assert_eq!(writer.written().map(|w| w.drain_progress), Some(0));
        assert_eq!(writer.decide(now), Flush::Now, "retried");
    }
}
