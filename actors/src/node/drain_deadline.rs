//! The opt-in drain deadline (`spec.drainTimeout`): when it falls, how much time is left in
//! words, how a Go duration is written, and the armed deadline of a drain under way
//! ([`DrainDeadline`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::messages::{NodeMsg, Wake};
use crate::timers::Timers;

/// The deadline of a drain under way, on two clocks: the wall clock says when it falls (what
/// the status shows, and what a restarted actor computes it from: `drainStartTime` plus
/// `drainTimeout`), the monotonic clock decides when it has passed, so that a step of the wall
/// clock (NTP correcting it, say) neither fails a drain early nor holds it past its time.
/// Its timer ([`Wake::DrainDeadline`], at `at`) is in the actor's table: cancelled when the
/// drain ends (`NodeActorState::set_stage`) or its deadline goes.
#[derive(Debug)]
pub(super) struct DrainDeadline {
    wall: DateTime<Utc>,
    at: Instant,
}

impl DrainDeadline {
    /// The deadline that falls at `due` by the wall clock, which reads `now`; its timer in
    /// `timers` (replacing the one of an earlier deadline) tells the actor.
    pub(super) fn arm(
        due: DateTime<Utc>,
        now: DateTime<Utc>,
        timers: &mut Timers<NodeMsg>,
    ) -> Self {
        let after = left(due, now);
        timers.set(Wake::DrainDeadline, after);
        DrainDeadline {
            wall: due,
            at: Instant::now() + after,
        }
    }

    /// When it falls, by the wall clock.
    pub(super) fn wall(&self) -> DateTime<Utc> {
        self.wall
    }

    /// How long until it falls, by the monotonic clock (zero once passed).
    pub(super) fn left(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// Whether it has passed, by the monotonic clock.
    pub(super) fn passed(&self) -> bool {
        Instant::now() >= self.at
    }
}

/// When the drain that began at `start` must be done, for a timeout of `timeout`.
pub(super) fn deadline(start: DateTime<Utc>, timeout: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(timeout)
        .ok()
        .and_then(|d| start.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// How long until `deadline` from `now` (zero once passed).
pub(super) fn left(deadline: DateTime<Utc>, now: DateTime<Utc>) -> Duration {
    (deadline - now).to_std().unwrap_or(Duration::ZERO)
}

/// A duration as Go writes it, without zero units: `30m`, `1h30m`, `45s`, `0s`.
pub(super) fn go_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// The time left as the status shows it: rounded up to the minute (to the 10 s in the last
/// minute), so that showing it costs a status write per minute, not per tick.
pub(super) fn remaining_text(left: Duration) -> String {
    let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    let step = if secs > 60 { 60 } else { 10 };
    go_duration(Duration::from_secs(secs.div_ceil(step) * step))
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn go_durations_drop_zero_units() {
        assert_eq!(go_duration(Duration::from_secs(1800)), "30m");
        assert_eq!(go_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(go_duration(Duration::from_secs(3605)), "1h5s");
        assert_eq!(go_duration(Duration::ZERO), "0s");
    }

    #[test]
    fn the_time_left_is_coarse() {
        assert_eq!(remaining_text(Duration::from_secs(1799)), "30m");
        assert_eq!(remaining_text(Duration::from_millis(60_500)), "2m");
        assert_eq!(remaining_text(Duration::from_secs(60)), "1m");
        assert_eq!(remaining_text(Duration::from_secs(41)), "50s");
        assert_eq!(remaining_text(Duration::ZERO), "0s");
    }

    #[test]
    fn the_deadline_counts_from_the_start_of_the_drain() {
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).single().unwrap();
        let due = deadline(start, Duration::from_secs(1800));
        assert_eq!(
            due,
            Utc.with_ymd_and_hms(2026, 1, 1, 0, 30, 0).single().unwrap()
        );
        assert_eq!(left(due, start), Duration::from_secs(1800));
        assert_eq!(left(start, due), Duration::ZERO, "passed");
    }
}
