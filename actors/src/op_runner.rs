//! Single flight for an actor's cluster operations on one object (a node actor's reconcile,
//! drain pass and undo; the supervisor's handling of one duplicate NodeMaintenance),
//! kube-runtime's rule: never two at once; a request arriving while one runs makes exactly one
//! more run after it, which then decides from what is current.

use std::future::Future;
use std::time::Duration;

use ractor::{ActorRef, Message};
use tokio::time::Instant;

use crate::task::TaskSet;

/// Whether an operation runs, and whether another was asked for meanwhile.
#[derive(Debug, Default)]
pub(crate) struct OpRunner {
    running: bool,
    again: bool,
    /// When the running operation started.
    started: Option<Instant>,
}

impl OpRunner {
    /// May an operation start now? While one runs: no, and one more runs after it.
    pub(crate) fn may_start(&mut self) -> bool {
        if self.running {
            self.again = true;
            return false;
        }
        true
    }

    /// Starts `work` in a task of `tasks` ; its result
    /// comes back as `into_msg` makes it.
    pub(crate) fn run<M, T, W, F>(
        &mut self,
        tasks: &mut TaskSet,
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
        self.running = true;
        self.started = Some(Instant::now());
        tasks.spawn_cast_back(actor, span, work, into_msg);
    }

    /// Whether an operation runs now.
    pub(crate) fn running(&self) -> bool {
        self.running
    }

    /// The running operation's result arrived; returns how long it ran.
    pub(crate) fn finished(&mut self) -> Duration {
        self.running = false;
        self.started
            .take()
            .map_or(Duration::ZERO, |started| started.elapsed())
    }

    /// Asks for one more operation once the result at hand is handled.
    pub(crate) fn again(&mut self) {
        self.again = true;
    }

    /// Whether an operation was asked for since the last call (and forgets it).
    pub(crate) fn take_again(&mut self) -> bool {
        std::mem::take(&mut self.again)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_while_running_collapse_into_one_more_run() {
        let mut runner = OpRunner::default();
        assert!(runner.may_start());
        runner.running = true;
        assert!(!runner.may_start());
        assert!(!runner.may_start());
        runner.finished();
        assert!(runner.take_again(), "one more run");
        assert!(!runner.take_again(), "only one");
        assert!(runner.may_start());
    }

    #[test]
    fn nothing_asked_while_idle_means_no_rerun() {
        let mut runner = OpRunner {
            running: true,
            again: false,
            started: None,
        };
        runner.finished();
        assert!(!runner.take_again());
        runner.again();
        assert!(runner.take_again());
    }
}
