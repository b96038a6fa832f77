//! The supervisor's orphan sweeps (the sweep itself is `crate::sweep`): one run at a time, one
//! more after it when asked meanwhile, and a retry with a growing wait after one that failed.
//! Changed only here.

use ractor::ActorRef;

use super::messages::{SupervisorMsg, Wake};
use crate::config::Config;
use crate::op_runner::OpRunner;
use crate::retry::Backoff;
use crate::sweep::{SweepError, SweepReport};
use crate::task::TaskSet;
use crate::timers::Timers;

/// The orphan sweep's runs and failures in a row.
#[derive(Debug, Default)]
pub(super) struct OrphanSweeps {
    /// One run at a time.
    runs: OpRunner,
    /// Sweeps that failed in a row: each retry waits longer.
    failures: Backoff,
}

/// What to do once a sweep ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum AfterSweep {
    /// Another sweep was asked for meanwhile: run it now.
    Again,
    /// Nothing (it succeeded, or its retry is set).
    Done,
}

impl OrphanSweeps {
    /// A sweep is asked for: true when it may start now (the caller starts it with
    /// [`Self::run`]); otherwise one more runs after the one running. A pending retry is no
    /// longer needed either way.
    pub(super) fn asked(&mut self, timers: &mut Timers<SupervisorMsg>) -> bool {
        if !self.runs.may_start() {
            return false;
        }
        timers.cancel(&Wake::Sweep);
        true
    }

    /// Runs `work`, a sweep, among the supervisor's `tasks`.
    pub(super) fn run(
        &mut self,
        tasks: &mut TaskSet,
        myself: &ActorRef<SupervisorMsg>,
        work: impl Future<Output = Result<SweepReport, SweepError>> + Send + 'static,
    ) {
        let span = tracing::info_span!(parent: None, "orphan_sweep");
        self.runs
            .run(tasks, myself, span, work, SupervisorMsg::Swept);
    }

    /// A sweep ended with `result`: a failed one (or one that could not give back every
    /// node) is retried after a wait.
    pub(super) fn ended(
        &mut self,
        timers: &mut Timers<SupervisorMsg>,
        config: &Config,
        result: &Result<SweepReport, SweepError>,
    ) -> AfterSweep {
        self.runs.finished();
        let complete = match result {
            Ok(report) => {
                if !report.restored.is_empty() {
                    tracing::info!(nodes = ?report.restored, "orphaned nodes given back");
                }
                report.failed.is_empty()
            }
            Err(error) => {
                tracing::warn!(%error, "orphan sweep failed");
                false
            }
        };
        if self.runs.take_again() {
            return AfterSweep::Again;
        }
        if complete {
            self.failures.succeeded();
        } else {
            let delay = self
                .failures
                .failed(config.retry_backoff_base, config.retry_backoff_max);
            timers.set(Wake::Sweep, delay);
        }
        AfterSweep::Done
    }
}
