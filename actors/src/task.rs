//! The background work an actor owns. An actor handles one message at a time, so anything that
//! waits (a cluster call, a timer, a watch) runs in a task of its own and reports back as a
//! message; these are the two shapes of that.

use std::future::Future;

use ractor::{ActorRef, Message};
use tokio::task::{AbortHandle, JoinHandle};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

/// Every task an actor spawned for its cluster work (operations, status writes, events,
/// eviction calls). When the actor stops they are cancelled and awaited, so that nothing it
/// started can reach the API server once it is gone: on a leader handover the old leader's
/// in-flight work is over before it releases its lease.
///
/// The set keeps no handle on its tasks, only a count of those still running and a token that
/// cancels them all: a task's memory (its future, sized for its largest await) is freed the
/// moment it ends, not when the actor next spawns one (a `JoinSet` keeps an ended task until it
/// is joined: about 4 KB for each of 1,000 maintenances at once, in the heap profile).
#[derive(Debug, Default)]
pub(crate) struct TaskSet {
    tracker: TaskTracker,
    cancel: CancellationToken,
}

impl TaskSet {
    /// Runs `work` in a task of this set and casts its result back to `actor` as the message `into_msg` makes of it.
    pub(crate) fn spawn_cast_back<M, T, W, F>(
        &mut self,
        actor: &ActorRef<M>,
        span: tracing::Span,
        work: W,
        into_msg: F,
    ) where
        M: Message,
        T: Send + 'static,
        W: Future<Output = T> + Send + 'static,
        F: FnOnce(T) -> M + Send + 'static,
    {
        let actor = actor.clone();
        // Boxed: an async block keeps a future it awaits twice (as captured, and as awaited),
        // so the task would hold two copies of `work`'s state (a status write's ~1 KB).
        let work = Box::pin(work);
        self.spawn(
            async move {
                let result = work.await;
                // The actor may have stopped meanwhile: nobody is left to tell.
                let _ = actor.cast(into_msg(result));
            }
            .instrument(span),
        );
    }

    /// Runs `work` in a task of this set.
    pub(crate) fn spawn(&mut self, work: impl Future<Output = ()> + Send + 'static) {
        let cancel = self.cancel.clone();
        // Boxed for the reason `spawn_cast_back` gives: `select!` moves `work` again.
        let work = Box::pin(work);
        self.tracker.spawn(async move {
            // Cancelled: `work` is dropped at the await it is at, as an aborted task's is.
            tokio::select! {
                biased;
                () = cancel.cancelled() => {}
                () = work => {}
            }
        });
    }

    /// Cancels every task and waits until each has stopped; the set then takes new tasks.
    pub(crate) async fn cancel_all(&mut self) {
        self.cancel.cancel();
        self.tracker.close();
        self.tracker.wait().await;
        self.tracker.reopen();
        self.cancel = CancellationToken::new();
    }

    /// Tasks still running.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.tracker.len()
    }
}

/// A background task an actor owns (a ractor timer from `send_after`/`send_interval`, a watch
/// loop): aborted when replaced, cleared or dropped, so a stale timer never fires after its
/// reason is gone and nothing outlives the actor's state.
#[derive(Debug, Default)]
pub(crate) struct TaskSlot(Option<AbortHandle>);

impl TaskSlot {
    /// Owns `task`, aborting the one owned before.
    pub(crate) fn set<T>(&mut self, task: JoinHandle<T>) {
        self.clear();
        self.0 = Some(task.abort_handle());
    }

    /// Aborts the task owned, if any.
    pub(crate) fn clear(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }

    /// Forgets the task without aborting it: it has finished (e.g. the timer fired and its
    /// message is being handled).
    pub(crate) fn finished(&mut self) {
        self.0 = None;
    }

    /// True while a task is owned.
    pub(crate) fn is_set(&self) -> bool {
        self.0.is_some()
    }
}

impl Drop for TaskSlot {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_replaced_or_dropped_task_is_aborted() {
        let first = tokio::spawn(tokio::time::sleep(Duration::from_secs(60)));
        let second = tokio::spawn(tokio::time::sleep(Duration::from_secs(60)));
        let (first_abort, second_abort) = (first.abort_handle(), second.abort_handle());
        let mut slot = TaskSlot::default();
        slot.set(first);
        assert!(slot.is_set());
        slot.set(second);
        tokio::task::yield_now().await;
        assert!(first_abort.is_finished(), "replaced: aborted");
        assert!(!second_abort.is_finished());
        drop(slot);
        tokio::task::yield_now().await;
        assert!(second_abort.is_finished(), "dropped: aborted");
    }

    #[tokio::test(start_paused = true)]
    async fn cancelling_a_set_aborts_and_awaits_every_task() {
        let (done, mut finished) = tokio::sync::mpsc::unbounded_channel::<()>();
        let mut set = TaskSet::default();
        for _ in 0..3 {
            let done = done.clone();
            set.spawn(async move {
                tokio::time::sleep(Duration::from_secs(60)).await;
                let _ = done.send(());
            });
        }
        set.cancel_all().await;
        assert_eq!(set.len(), 0);
        drop(done);
        assert_eq!(finished.recv().await, None, "no task ran to its end");
    }

    /// An ended task is not kept until the next spawn (a `JoinSet` kept it, and with it the
    /// task's whole allocation, until it was joined).
    #[tokio::test(start_paused = true)]
    async fn a_task_is_let_go_the_moment_it_ends() {
        let mut set = TaskSet::default();
        set.spawn(async {});
        set.spawn(tokio::time::sleep(Duration::from_secs(60)));
        tokio::task::yield_now().await;
        assert_eq!(set.len(), 1, "only the sleeping task is held");
        tokio::time::sleep(Duration::from_secs(61)).await;
        assert_eq!(set.len(), 0, "no task is held once all ended");
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_set_runs_the_tasks_spawned_after() {
        let mut set = TaskSet::default();
        set.spawn(tokio::time::sleep(Duration::from_secs(60)));
        set.cancel_all().await;
        let (done, finished) = tokio::sync::oneshot::channel();
        set.spawn(async move {
            let _ = done.send(());
        });
        assert_eq!(
            finished.await,
            Ok(()),
            "a task spawned after the cancel ran"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn ended_tasks_do_not_accumulate() {
        let mut set = TaskSet::default();
        for _ in 0..100 {
            set.spawn(async {});
            tokio::task::yield_now().await;
        }
        assert!(set.len() <= 2, "{} tasks kept", set.len());
    }

    #[tokio::test(start_paused = true)]
    async fn a_finished_task_is_forgotten_not_aborted() {
        let task = tokio::spawn(tokio::time::sleep(Duration::from_secs(60)));
        let abort = task.abort_handle();
        let mut slot = TaskSlot::default();
        slot.set(task);
        slot.finished();
        assert!(!slot.is_set());
        drop(slot);
        tokio::task::yield_now().await;
        assert!(!abort.is_finished());
        abort.abort();
    }
}
