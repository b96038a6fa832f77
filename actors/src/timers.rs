//! An actor's timers, in one table: every wake-up it asks for is one value of its wake type
//! ([`WakeMsg::Wake`]), delivered as the one message [`WakeMsg::wake`] makes of it, and each
//! kind of wake-up has at most one timer pending. Setting a kind again replaces its timer
//! ([`Timers::set`], [`Timers::every`]) or keeps the one that fires sooner
//! ([`Timers::set_unless_sooner`]); cancelling aborts it; the table cancels everything it holds
//! when the actor stops or the table is dropped, so no timer outlives the actor and none is
//! left untracked. The node, eviction and supervisor actors each keep one.
//!
//! Due times are on tokio's monotonic clock: a step of the wall clock neither fires a timer
//! early nor holds it back.
//!
//! A timer that already fired is a message in the mailbox: cancelling it then cannot take the
//! message back (the handlers take a late wake-up as they always did). What the table
//! guarantees is that a timer cancelled or replaced before it fired never delivers.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ractor::{ActorRef, Message};
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// An actor's message type that has one variant for all its wake-ups.
pub(crate) trait WakeMsg: Message {
    /// What a timer wakes the actor for: one timer pending at most per value.
    type Wake: Clone + Eq + Hash + fmt::Debug + Send + Sync + 'static;

    /// The message that delivers `wake`.
    fn wake(wake: Self::Wake) -> Self;

    /// The wake-up a message delivers, if it is one (the tests' forwarding actor).
    #[cfg(test)]
    fn into_wake(self) -> Option<Self::Wake>;
}

/// One pending timer.
#[derive(Debug)]
struct Timer {
    /// When it fires (the first time, for a repeating one).
    due: Instant,
    /// Set by the timer's task just before it sends a one-shot's message: from then on that
    /// message is on its way (or in the mailbox) and nothing is pending any more. A repeating
    /// timer never sets it.
    fired: Arc<AtomicBool>,
    task: AbortHandle,
}

impl Timer {
    fn pending(&self) -> bool {
        !self.fired.load(Ordering::SeqCst)
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        // Aborting a timer that fired is a no-op; one that did not never delivers.
        self.task.abort();
    }
}

/// The timer table of one actor: which wake-ups are pending, each at most once.
pub(crate) struct Timers<M: WakeMsg> {
    /// Where the wake-ups go: the actor itself.
    actor: ActorRef<M>,
    timers: HashMap<M::Wake, Timer>,
}

impl<M: WakeMsg> fmt::Debug for Timers<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timers")
            .field("actor", &self.actor.get_id())
            .field("timers", &self.timers)
            .finish()
    }
}

impl<M: WakeMsg> Timers<M> {
    /// An empty table whose timers wake `actor`.
    pub(crate) fn new(actor: ActorRef<M>) -> Self {
        Timers {
            actor,
            timers: HashMap::new(),
        }
    }

    /// `wake` comes once, `after` from now; a timer of the same kind pending before is
    /// replaced (it never fires).
    pub(crate) fn set(&mut self, wake: M::Wake, after: Duration) {
        let fired = Arc::new(AtomicBool::new(false));
        let flag = fired.clone();
        let message = wake.clone();
        let task = self.actor.send_after(after, move || {
            flag.store(true, Ordering::SeqCst);
            M::wake(message)
        });
        self.insert(wake, after, fired, task.abort_handle());
    }

    /// `wake` comes once, `after` from now, unless a timer of the same kind is pending that
    /// fires no later: that one stays (and this one is not set).
    pub(crate) fn set_unless_sooner(&mut self, wake: M::Wake, after: Duration) {
        let due = Instant::now() + after;
        let sooner = self
            .timers
            .get(&wake)
            .is_some_and(|timer| timer.pending() && timer.due <= due);
        if !sooner {
            self.set(wake, after);
        }
    }

    /// `wake` comes every `period`, the first time `period` from now; a timer of the same kind
    /// pending before is replaced.
    pub(crate) fn every(&mut self, wake: M::Wake, period: Duration) {
        // Never set: a repeating timer stays pending until it is cancelled.
        let fired = Arc::new(AtomicBool::new(false));
        let message = wake.clone();
        let task = self
            .actor
            .send_interval(period, move || M::wake(message.clone()));
        self.insert(wake, period, fired, task.abort_handle());
    }

    fn insert(
        &mut self,
        wake: M::Wake,
        after: Duration,
        fired: Arc<AtomicBool>,
        task: AbortHandle,
    ) {
        let timer = Timer {
            due: Instant::now() + after,
            fired,
            task,
        };
        // The timer replaced (if any) is dropped here, which aborts it.
        self.timers.insert(wake, timer);
    }

    /// No `wake` comes from a timer set before now (unless it already fired).
    pub(crate) fn cancel(&mut self, wake: &M::Wake) {
        self.timers.remove(wake);
    }

    /// Cancels every timer (the actor stops).
    pub(crate) fn cancel_all(&mut self) {
        self.timers.clear();
    }

    /// When the timer of this kind fires, while it is pending (the first time, for a
    /// repeating one).
    pub(crate) fn due(&self, wake: &M::Wake) -> Option<Instant> {
        self.timers
            .get(wake)
            .filter(|timer| timer.pending())
            .map(|timer| timer.due)
    }

    /// Whether a timer of this kind is pending: set, not cancelled, and (a one-shot) not fired
    /// yet. A repeating timer stays pending until it is cancelled.
    pub(crate) fn is_set(&self, wake: &M::Wake) -> bool {
        self.timers.get(wake).is_some_and(Timer::pending)
    }
}

/// A table whose wake-ups land in a channel, for tests.
#[cfg(test)]
pub(crate) mod testing {
    use std::marker::PhantomData;

    use ractor::{Actor, ActorProcessingErr, ActorRef};
    use tokio::sync::mpsc;

    use super::{Timers, WakeMsg};

    /// Forwards every wake-up it receives into a channel.
    struct Forward<M>(PhantomData<fn() -> M>);

    impl<M: WakeMsg> Actor for Forward<M> {
        type Msg = M;
        type State = mpsc::UnboundedSender<M::Wake>;
        type Arguments = mpsc::UnboundedSender<M::Wake>;

        async fn pre_start(
            &self,
            _myself: ActorRef<M>,
            to: Self::Arguments,
        ) -> Result<Self::State, ActorProcessingErr> {
            Ok(to)
        }

        async fn handle(
            &self,
            _myself: ActorRef<M>,
            message: M,
            to: &mut Self::State,
        ) -> Result<(), ActorProcessingErr> {
            if let Some(wake) = message.into_wake() {
                let _ = to.send(wake);
            }
            Ok(())
        }
    }

    /// A table and the wake-ups it delivers.
    pub(crate) async fn table<M: WakeMsg>() -> (Timers<M>, mpsc::UnboundedReceiver<M::Wake>) {
        let (to, from) = mpsc::unbounded_channel();
        let (actor, _) = Actor::spawn(None, Forward(PhantomData), to)
            .await
            .expect("a test actor without a name always starts");
        (Timers::new(actor), from)
    }

    /// Lets paused time run `d` on, then lets every timer due by then deliver: a timer due at
    /// the very instant the sleep ends wakes with it, and its message still has to pass
    /// through the actor (tasks of the test's single-threaded runtime take turns).
    pub(crate) async fn pass(d: std::time::Duration) {
        tokio::time::sleep(d).await;
        for _ in 0..64 {
            tokio::task::yield_now().await;
        }
    }

    /// The wake-ups delivered up to now.
    pub(crate) fn delivered<W>(from: &mut mpsc::UnboundedReceiver<W>) -> Vec<W> {
        std::iter::from_fn(|| from.try_recv().ok()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{delivered, pass, table};
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    // The tables under test are the actors' own: the node actor's kinds, and the eviction
    // actor's for a wake-up keyed by a string (its gates).
    use crate::eviction::{EvictionMsg, Wake as EvictionWake};
    use crate::node::{NodeMsg, Wake, WatchKind};

    #[tokio::test(start_paused = true)]
    async fn wake_ups_with_keys_of_their_own_are_kinds_of_their_own() {
        let (mut timers, mut from) = table::<EvictionMsg>().await;
        let (a, b) = (
            EvictionWake::GateOpen("ns/a".into()),
            EvictionWake::GateOpen("ns/b".into()),
        );
        timers.set(a.clone(), 10 * SEC);
        timers.set(b.clone(), 20 * SEC);
        let start = Instant::now();
        timers.set(a.clone(), 30 * SEC);
        assert_eq!(timers.due(&a), Some(start + 30 * SEC));
        pass(20 * SEC).await;
        assert_eq!(
            delivered(&mut from),
            std::slice::from_ref(&b),
            "a was replaced, b was not"
        );
        assert!(timers.is_set(&a) && !timers.is_set(&b));
        assert_eq!(timers.due(&b), None, "fired: not due any more");
        timers.cancel(&a);
        pass(3600 * SEC).await;
        assert_eq!(delivered(&mut from), []);
    }

    #[tokio::test(start_paused = true)]
    async fn a_timer_delivers_its_wake_once_when_due() {
        let (mut timers, mut from) = table::<NodeMsg>().await;
        timers.set(Wake::RetryDue, 10 * SEC);
        assert!(timers.is_set(&Wake::RetryDue));
        pass(Duration::from_millis(9_999)).await;
        assert_eq!(delivered(&mut from), [], "not due yet");
        pass(Duration::from_millis(1)).await;
        assert_eq!(delivered(&mut from), [Wake::RetryDue]);
        assert!(!timers.is_set(&Wake::RetryDue), "fired: nothing pending");
        pass(3600 * SEC).await;
        assert_eq!(delivered(&mut from), [], "once");
    }

    #[tokio::test(start_paused = true)]
    async fn setting_a_kind_again_replaces_its_timer() {
        let (mut timers, mut from) = table::<NodeMsg>().await;
        timers.set(Wake::LeaseExpiring, 10 * SEC);
        timers.set(Wake::LeaseExpiring, 30 * SEC);
        pass(29 * SEC).await;
        assert_eq!(delivered(&mut from), [], "the first timer was replaced");
        pass(SEC).await;
        assert_eq!(delivered(&mut from), [Wake::LeaseExpiring]);
        pass(3600 * SEC).await;
        assert_eq!(delivered(&mut from), []);
        // Replacing by a sooner one works too.
        timers.set(Wake::LeaseExpiring, 30 * SEC);
        timers.set(Wake::LeaseExpiring, 5 * SEC);
        pass(5 * SEC).await;
        assert_eq!(delivered(&mut from), [Wake::LeaseExpiring]);
        pass(3600 * SEC).await;
        assert_eq!(delivered(&mut from), []);
    }

    #[tokio::test(start_paused = true)]
    async fn set_unless_sooner_keeps_the_timer_that_fires_first() {
        let (mut timers, mut from) = table::<NodeMsg>().await;
        let wake = Wake::Resubscribe(WatchKind::Pods);
        timers.set_unless_sooner(wake, 10 * SEC);
        timers.set_unless_sooner(wake, 30 * SEC);
        pass(10 * SEC).await;
        assert_eq!(
            delivered(&mut from),
            std::slice::from_ref(&wake),
            "the sooner one stayed"
        );
        pass(3600 * SEC).await;
        assert_eq!(delivered(&mut from), [], "and the later one was never set");
        // A sooner one replaces a later one.
        timers.set_unless_sooner(wake, 30 * SEC);
        timers.set_unless_sooner(wake, 5 * SEC);
        pass(5 * SEC).await;
        assert_eq!(delivered(&mut from), std::slice::from_ref(&wake));
        pass(3600 * SEC).await;
        assert_eq!(delivered(&mut from), []);
        // Once the pending one fired, a new one is set again.
        timers.set_unless_sooner(wake, 5 * SEC);
        pass(5 * SEC).await;
        timers.set_unless_sooner(wake, 5 * SEC);
        pass(5 * SEC).await;
        assert_eq!(delivered(&mut from), [wake, wake]);
    }

    #[tokio::test(start_paused = true)]
    async fn each_watch_kind_resubscribes_on_a_timer_of_its_own() {
        let (mut timers, mut from) = table::<NodeMsg>().await;
        timers.set(Wake::Resubscribe(WatchKind::Node), 10 * SEC);
        timers.set(Wake::Resubscribe(WatchKind::Lease), 20 * SEC);
        pass(20 * SEC).await;
        assert_eq!(
            delivered(&mut from),
            [
                Wake::Resubscribe(WatchKind::Node),
                Wake::Resubscribe(WatchKind::Lease)
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_timer_never_delivers() {
        let (mut timers, mut from) = table::<NodeMsg>().await;
        timers.set(Wake::RetryRenewal, 10 * SEC);
        timers.set(Wake::DrainDeadline, 10 * SEC);
        timers.every(Wake::RenewLease, 10 * SEC);
        pass(5 * SEC).await;
        timers.cancel(&Wake::RetryRenewal);
        timers.cancel(&Wake::RenewLease);
        assert!(!timers.is_set(&Wake::RetryRenewal) && !timers.is_set(&Wake::RenewLease));
        pass(3600 * SEC).await;
        // The timer not cancelled shows that a cancelled one would have been delivered.
        assert_eq!(delivered(&mut from), [Wake::DrainDeadline]);
        // Cancelling what is not set, or what fired, is fine.
        timers.cancel(&Wake::DrainDeadline);
        timers.cancel(&Wake::FlushStatus);
    }

    #[tokio::test(start_paused = true)]
    async fn cancel_all_cancels_every_kind() {
        let (mut timers, mut from) = table::<NodeMsg>().await;
        timers.every(Wake::Tick, 10 * SEC);
        timers.set(Wake::RetryDue, 10 * SEC);
        timers.set(Wake::FlushStatus, 10 * SEC);
        timers.set(Wake::Resubscribe(WatchKind::Vms), 10 * SEC);
        timers.cancel_all();
        for wake in [
            Wake::Tick,
            Wake::RetryDue,
            Wake::FlushStatus,
            Wake::Resubscribe(WatchKind::Vms),
        ] {
            assert!(!timers.is_set(&wake), "{wake:?}");
        }
        pass(3600 * SEC).await;
        assert_eq!(delivered(&mut from), []);
        // The table still works afterwards.
        timers.set(Wake::RetryDue, SEC);
        pass(SEC).await;
        assert_eq!(delivered(&mut from), [Wake::RetryDue]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_table_cancels_its_timers() {
        let (mut timers, mut from) = table::<NodeMsg>().await;
        timers.set(Wake::RetryDue, 10 * SEC);
        timers.every(Wake::Tick, 10 * SEC);
        drop(timers);
        pass(3600 * SEC).await;
        assert_eq!(delivered(&mut from), []);
    }

    #[tokio::test(start_paused = true)]
    async fn a_repeating_timer_stays_set_and_delivers_every_period() {
        let (mut timers, mut from) = table::<NodeMsg>().await;
        let start = Instant::now();
        timers.every(Wake::Tick, 10 * SEC);
        pass(35 * SEC).await;
        assert_eq!(delivered(&mut from), [Wake::Tick, Wake::Tick, Wake::Tick]);
        assert!(timers.is_set(&Wake::Tick));
        // Setting it again starts its period over.
        timers.every(Wake::Tick, 10 * SEC);
        pass(9 * SEC).await;
        assert_eq!(
            delivered(&mut from),
            [],
            "44 s: the old period would have ticked at 40 s"
        );
        pass(SEC).await;
        assert_eq!(delivered(&mut from), [Wake::Tick]);
        assert_eq!(Instant::now() - start, 45 * SEC);
    }
}
