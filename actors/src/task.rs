//! The background work an actor owns. An actor handles one message at a time, so anything that
//! waits (a cluster call, a timer, a watch) runs in a task of its own and reports back as a
//! message; these are the two shapes of that.

use std::future::Future;

use ractor::{ActorRef, Message};
use tokio::task::{AbortHandle, JoinHandle};
use tracing::Instrument;

/// Runs `work` in a task of its own, inside `span`, and casts its result back to `actor` as
/// the message `into_msg` makes of it. The one way the actors run cluster calls: the handler
/// that starts the work returns at once, so the mailbox (timers, deletion) never waits on the
/// API.
pub(crate) fn spawn_cast_back<M, T, W, F>(
    actor: &ActorRef<M>,
    span: tracing::Span,
    work: W,
    into_msg: F,
) -> JoinHandle<()>
where
    M: Message,
    T: Send + 'static,
    W: Future<Output = T> + Send + 'static,
    F: FnOnce(T) -> M + Send + 'static,
{
    let actor = actor.clone();
    tokio::spawn(
        async move {
            let result = work.await;
            // The actor may have stopped meanwhile: nobody is left to tell.
            let _ = actor.cast(into_msg(result));
        }
        .instrument(span),
    )
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
