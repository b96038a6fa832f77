//! The lease keeper: renews the node lease on a timer while the node is in maintenance, one
//! renewal at a time; retries a failed renewal within seconds (with backoff) instead of at the
//! next interval; knows, on the local monotonic clock, until when the lease is surely ours, so
//! that evictions pause before it can lapse; knows when another holder has taken it (seen by
//! the lease watch or a renewal), so that evictions stop at once; and counts failures like NMO
//! (only once the lease was held).
//!
//! How failures count: NMO counts every failed attempt, but it attempts only when it happens to
//! reconcile. nmo retries a failed renewal within seconds, so counting every attempt that fails
//! for a transient reason (the API server restarting, say) would make a maintenance give up
//! (and undo its drain) within a minute, while its lease is still valid for most of an hour:
//! those count once per renewal interval, so giving up (above 3) happens once the lease has
//! really lapsed. A lease another holder has taken is no transient failure: every attempt that
//! finds it so counts, and the maintenance gives up within seconds (the 4th attempt, about
//! 7 s after the takeover with the 1 s retry base), as NMO does.

use std::time::Duration;

use tokio::time::Instant;

use super::messages::{NodeMsg, Wake};
use crate::decisions::{self, LeaseFailure};
use crate::model::{Lease, Uid};
use crate::retry::Backoff;
use crate::timers::Timers;

/// What the node actor knows about its lease. Its timers are in the actor's table
/// ([`Wake::RenewLease`], [`Wake::RetryRenewal`], [`Wake::LeaseExpiring`]), which it is handed
/// where it sets or cancels one.
#[derive(Debug, Default)]
pub(super) struct LeaseKeeper {
    /// The lease was held at least once: from then on failures count (NMO counts them once
    /// evictions began, which is right after).
    held_once: bool,
    /// Uid of the node (the lease's owner), once read: a renewal that finds the lease gone
    /// re-creates it owned by the node.
    node_uid: Uid,
    renewing: bool,
    /// When the renewal out now was sent.
    renewal_sent: Option<Instant>,
    /// Until when the lease is surely ours: when the last successful take or renewal was sent,
    /// plus the lease's duration (the lease's renewTime is at least that late).
    held_until: Option<Instant>,
    /// Evictions are paused: the lease is about to expire or has.
    paused: bool,
    /// A failure was already counted in this renewal interval.
    counted_this_interval: bool,
    /// Failed renewals in a row, and the retry after the last one.
    retries: Backoff,
    /// The lease as nmo last wrote it (taken or renewed): while it is surely ours, the undo
    /// deletes it on this resourceVersion without reading it first.
    written: Option<Lease>,
    /// Another holder has the lease (since it was last ours): its identity.
    taken_by: Option<String>,
}

impl LeaseKeeper {
    /// The keeper of a maintenance taken over from an earlier leader (or an earlier run):
    /// `held_before` when its status says nmo held the lease, so that a holder found there now
    /// counts as a lease lost, not as one to wait for.
    pub(super) fn resumed(held_before: bool) -> Self {
        LeaseKeeper {
            held_once: held_before,
            ..LeaseKeeper::default()
        }
    }

    /// The lease is ours, taken by a request sent at `sent`; `node_uid` is the node's.
    pub(super) fn acquired(
        &mut self,
        timers: &mut Timers<NodeMsg>,
        node_uid: &Uid,
        sent: Instant,
        duration: Duration,
    ) {
        self.held_once = true;
        self.node_uid = node_uid.clone();
        self.held(timers, sent, duration);
    }

    /// nmo held the lease before this actor knew of it (the node carries this maintenance's
    /// marks): from now on failures count.
    pub(super) fn held_before(&mut self) {
        self.held_once = true;
    }

    fn held(&mut self, timers: &mut Timers<NodeMsg>, sent: Instant, duration: Duration) {
        self.taken_by = None;
        let until = sent + duration;
        self.held_until = Some(self.held_until.map_or(until, |known| known.max(until)));
        self.counted_this_interval = false;
        self.retries.succeeded();
        timers.cancel(&Wake::RetryRenewal);
    }

    /// nmo wrote the lease (took or renewed it): this is what the API has.
    pub(super) fn wrote(&mut self, lease: &Lease) {
        self.written = Some(lease.clone());
    }

    /// The lease as nmo last wrote it, while it is surely still ours: valid (a holder that
    /// follows the lease protocol only takes an expired lease), and no renewal failed since.
    /// A holder that grabs a valid lease anyway goes unseen until the next renewal (at most
    /// `lease_renew_interval`); the undo's deletion, conditional on this resourceVersion,
    /// still leaves its lease alone.
    pub(super) fn surely_ours(&self, now: Instant) -> Option<Lease> {
        self.written
            .clone()
            .filter(|_| self.held_until.is_some_and(|until| until > now))
    }

    /// True once the lease was held.
    pub(super) fn held_once(&self) -> bool {
        self.held_once
    }

    /// The node's uid, as last read.
    pub(super) fn node_uid(&self) -> &Uid {
        &self.node_uid
    }

    /// Starts the renewal timer, unless it runs.
    pub(super) fn keep_renewing(&mut self, timers: &mut Timers<NodeMsg>, every: Duration) {
        if !timers.is_set(&Wake::RenewLease) {
            timers.every(Wake::RenewLease, every);
        }
    }

    /// Stops renewing: the timers, the retry and the expiry watch.
    pub(super) fn stop_renewing(&mut self, timers: &mut Timers<NodeMsg>) {
        timers.cancel(&Wake::RenewLease);
        timers.cancel(&Wake::RetryRenewal);
        timers.cancel(&Wake::LeaseExpiring);
        self.paused = false;
    }

    /// A renewal is due (the interval's tick: a new interval, or a retry): true when it may
    /// start (none is out).
    pub(super) fn begin_renewal(
        &mut self,
        timers: &mut Timers<NodeMsg>,
        new_interval: bool,
    ) -> bool {
        if new_interval {
            self.counted_this_interval = false;
        }
        if std::mem::replace(&mut self.renewing, true) {
            return false;
        }
        timers.cancel(&Wake::RetryRenewal);
        self.renewal_sent = Some(Instant::now());
        true
    }

    /// The renewal ended, successfully or not.
    pub(super) fn renewal_ended(
        &mut self,
        timers: &mut Timers<NodeMsg>,
        renewed: bool,
        duration: Duration,
    ) {
        self.renewing = false;
        if !renewed {
            // The lease may not be as nmo wrote it (taken by another holder, say): from now on
            // the undo reads it.
            self.written = None;
        }
        let sent = self.renewal_sent.take();
        if renewed && let Some(sent) = sent {
            self.held(timers, sent, duration);
        }
    }

    /// A renewal failed: asks for a retry after a backoff (from `base`, at most `max`).
    pub(super) fn retry_later(
        &mut self,
        timers: &mut Timers<NodeMsg>,
        base: Duration,
        max: Duration,
    ) {
        let delay = self.retries.failed(base, max);
        timers.set(Wake::RetryRenewal, delay);
    }

    /// Another holder has the lease: from now on nothing may assume it is ours (the undo
    /// reads it first). True when this is news.
    pub(super) fn taken(&mut self, holder: &str) -> bool {
        self.written = None;
        self.held_until = None;
        self.taken_by.replace(holder.to_string()).as_deref() != Some(holder)
    }

    /// Who holds the lease instead of nmo, if someone does (as last seen).
    pub(super) fn taken_by(&self) -> Option<&str> {
        self.taken_by.as_deref()
    }

    /// Counts one failure to take or keep the lease onto `count` (`errorOnLeaseCount`): every
    /// attempt when another holder has it (`taken`), else at most once per renewal interval.
    pub(super) fn count_failure(&mut self, count: i32, taken: bool) -> LeaseFailure {
        if self.counted_this_interval && !taken {
            return LeaseFailure {
                count,
                give_up: false,
            };
        }
        let counted = decisions::lease_failure(count, self.held_once);
        self.counted_this_interval = self.held_once;
        counted
    }

    /// Arms the expiry watch: [`Wake::LeaseExpiring`] comes `margin` before the lease can
    /// lapse.
    pub(super) fn watch_expiry(&mut self, timers: &mut Timers<NodeMsg>, margin: Duration) {
        let Some(until) = self.held_until else {
            return;
        };
        let at = until.checked_sub(margin).unwrap_or(until);
        let after = at.saturating_duration_since(Instant::now());
        timers.set(Wake::LeaseExpiring, after);
    }

    /// Whether the lease is within `margin` of lapsing (or lapsed) now.
    pub(super) fn expiring(&self, margin: Duration) -> bool {
        self.held_until
            .is_some_and(|until| Instant::now() + margin >= until)
    }

    /// Evictions pause (true when they were not paused yet).
    pub(super) fn pause(&mut self) -> bool {
        !std::mem::replace(&mut self.paused, true)
    }

    /// Evictions go on (true when they were paused).
    pub(super) fn resume(&mut self) -> bool {
        std::mem::replace(&mut self.paused, false)
    }

    /// Whether evictions are paused.
    pub(super) fn paused(&self) -> bool {
        self.paused
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timers::testing::{delivered, pass, table};

    const HOUR: Duration = Duration::from_secs(3600);

    #[tokio::test(start_paused = true)]
    async fn failures_count_only_once_the_lease_was_held() {
        let (mut timers, _wakes) = table().await;
        let mut keeper = LeaseKeeper::default();
        assert_eq!(keeper.count_failure(0, false).count, 0);
        keeper.acquired(&mut timers, &"uid-n1".into(), Instant::now(), HOUR);
        assert_eq!(keeper.node_uid(), "uid-n1");
        assert_eq!(keeper.count_failure(0, false).count, 1);
        keeper.begin_renewal(&mut timers, true);
        assert!(keeper.count_failure(3, false).give_up);
    }

    #[tokio::test(start_paused = true)]
    async fn failures_count_once_per_renewal_interval() {
        let (mut timers, _wakes) = table().await;
        let mut keeper = LeaseKeeper::default();
        keeper.acquired(&mut timers, &"uid-n1".into(), Instant::now(), HOUR);
        assert!(keeper.begin_renewal(&mut timers, true));
        keeper.renewal_ended(&mut timers, false, HOUR);
        assert_eq!(keeper.count_failure(0, false).count, 1);
        // Retries within the interval do not count again.
        assert!(keeper.begin_renewal(&mut timers, false));
        keeper.renewal_ended(&mut timers, false, HOUR);
        assert_eq!(keeper.count_failure(1, false).count, 1);
        // The next interval counts again.
        assert!(keeper.begin_renewal(&mut timers, true));
        keeper.renewal_ended(&mut timers, false, HOUR);
        assert_eq!(keeper.count_failure(1, false).count, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_taken_by_another_holder_counts_every_attempt_until_it_is_ours_again() {
        let (mut timers, _wakes) = table().await;
        let mut keeper = LeaseKeeper::default();
        keeper.acquired(&mut timers, &"uid-n1".into(), Instant::now(), HOUR);
        keeper.wrote(&Lease::test("n1", crate::model::LEASE_HOLDER));
        assert!(keeper.surely_ours(Instant::now()).is_some());
        assert!(keeper.taken("node-healthcheck"), "news");
        assert!(!keeper.taken("node-healthcheck"), "seen before");
        assert_eq!(keeper.taken_by(), Some("node-healthcheck"));
        assert!(
            keeper.surely_ours(Instant::now()).is_none(),
            "the undo reads it"
        );
        let counts: Vec<i32> = (0..4)
            .scan(0, |count, _| {
                *count = keeper.count_failure(*count, true).count;
                Some(*count)
            })
            .collect();
        assert_eq!(counts, [1, 2, 3, 4]);
        assert!(keeper.count_failure(3, true).give_up);
        assert!(keeper.begin_renewal(&mut timers, false));
        keeper.renewal_ended(&mut timers, true, HOUR);
        assert_eq!(keeper.taken_by(), None, "ours again");
    }

    #[tokio::test(start_paused = true)]
    async fn one_renewal_at_a_time() {
        let (mut timers, _wakes) = table().await;
        let mut keeper = LeaseKeeper::default();
        assert!(keeper.begin_renewal(&mut timers, true));
        assert!(!keeper.begin_renewal(&mut timers, true));
        keeper.renewal_ended(&mut timers, true, HOUR);
        assert!(keeper.begin_renewal(&mut timers, false));
    }

    #[tokio::test(start_paused = true)]
    async fn the_lease_is_held_until_its_duration_after_the_last_renewal_was_sent() {
        let (mut timers, _wakes) = table().await;
        let mut keeper = LeaseKeeper::default();
        let margin = Duration::from_secs(300);
        assert!(!keeper.expiring(margin), "never held: nothing to expire");
        keeper.acquired(&mut timers, &"uid-n1".into(), Instant::now(), HOUR);
        tokio::time::advance(Duration::from_secs(3600 - 300 - 1)).await;
        assert!(!keeper.expiring(margin));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(keeper.expiring(margin));
        assert!(keeper.begin_renewal(&mut timers, true));
        keeper.renewal_ended(&mut timers, true, HOUR);
        assert!(!keeper.expiring(margin), "renewed");
        assert!(keeper.pause() && !keeper.pause() && keeper.paused());
        assert!(keeper.resume() && !keeper.paused());
    }

    #[tokio::test(start_paused = true)]
    async fn renewing_starts_its_timer_unless_it_runs_and_stopping_cancels_every_lease_timer() {
        let (mut timers, mut wakes) = table().await;
        let mut keeper = LeaseKeeper::default();
        let every = Duration::from_secs(10);
        keeper.keep_renewing(&mut timers, every);
        pass(Duration::from_secs(5)).await;
        // Asked again halfway through the interval: the running timer stays.
        keeper.keep_renewing(&mut timers, every);
        pass(Duration::from_secs(5)).await;
        assert_eq!(delivered(&mut wakes), [Wake::RenewLease], "10 s, not 15 s");
        keeper.acquired(&mut timers, &"uid-n1".into(), Instant::now(), HOUR);
        keeper.watch_expiry(&mut timers, Duration::from_secs(300));
        keeper.retry_later(&mut timers, Duration::from_secs(1), Duration::from_secs(60));
        assert!(timers.is_set(&Wake::LeaseExpiring) && timers.is_set(&Wake::RetryRenewal));
        assert!(keeper.pause());
        keeper.stop_renewing(&mut timers);
        assert!(!keeper.paused());
        pass(2 * HOUR).await;
        assert_eq!(delivered(&mut wakes), [], "every lease timer was cancelled");
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_cancels_the_retry_of_the_failed_one() {
        let (mut timers, mut wakes) = table().await;
        let mut keeper = LeaseKeeper::default();
        let (base, max) = (Duration::from_secs(1), Duration::from_secs(60));
        keeper.retry_later(&mut timers, base, max);
        pass(Duration::from_secs(5)).await;
        assert_eq!(delivered(&mut wakes), [Wake::RetryRenewal]);
        keeper.retry_later(&mut timers, base, max);
        // The next interval's renewal goes out before the retry is due.
        assert!(keeper.begin_renewal(&mut timers, true));
        assert!(!timers.is_set(&Wake::RetryRenewal));
        keeper.renewal_ended(&mut timers, true, HOUR);
        pass(Duration::from_secs(120)).await;
        assert_eq!(delivered(&mut wakes), []);
    }

    #[tokio::test(start_paused = true)]
    async fn the_expiry_watch_fires_margin_before_the_lease_can_lapse() {
        let (mut timers, mut wakes) = table().await;
        let mut keeper = LeaseKeeper::default();
        let margin = Duration::from_secs(300);
        keeper.watch_expiry(&mut timers, margin);
        assert!(
            !timers.is_set(&Wake::LeaseExpiring),
            "never held: nothing to watch"
        );
        let start = Instant::now();
        keeper.acquired(&mut timers, &"uid-n1".into(), start, HOUR);
        keeper.watch_expiry(&mut timers, margin);
        pass(Duration::from_secs(1800)).await;
        // Renewed halfway: the watch moves to the new expiry.
        assert!(keeper.begin_renewal(&mut timers, true));
        keeper.renewal_ended(&mut timers, true, HOUR);
        keeper.watch_expiry(&mut timers, margin);
        pass(Duration::from_secs(3600 - 300 - 1)).await;
        assert_eq!(delivered(&mut wakes), [], "the first watch was replaced");
        pass(Duration::from_secs(1)).await;
        assert_eq!(delivered(&mut wakes), [Wake::LeaseExpiring]);
        assert_eq!(
            Instant::now() - start,
            Duration::from_secs(1800 + 3600 - 300)
        );
    }
}
