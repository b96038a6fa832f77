//! What the lease's messages do to a node actor: renewals and their failures, the lease as its
//! watch shows it, the pause of evictions while the lease is about to expire or is held by
//! another operator, and giving up when it cannot be kept.

use std::time::Duration;

use ractor::ActorRef;

use super::errors::{LeaseError, LeaseLost};
use super::messages::NodeMsg;
use super::ops;
use super::stage::{Failure, Stage};
use super::state::NodeActorState;
use crate::decisions;
use crate::model::{EventType, FailureKind, Lease, reasons};
use crate::observe::LeaseOp;

/// What `lastError` adds while evictions pause for the node lease.
const EVICTIONS_PAUSED: &str =
    "the node lease is about to expire: evictions paused until it is renewed";
/// What `lastError` adds while another operator holds the node lease.
const EVICTIONS_STOPPED: &str = "evictions stopped: another operator holds the node lease (nmo gives up after more than 3 failures to take it back)";

impl NodeActorState {
    /// The lease renewal timer (`new_interval`), or the retry of a failed renewal.
    pub(super) fn renew_lease(&mut self, myself: &ActorRef<NodeMsg>, new_interval: bool) {
        if !self.stage.keeps_lease() || !self.lease.begin_renewal(&mut self.timers, new_interval) {
            return;
        }
        let ctx = self.ctx.clone();
        // The node uid only matters if the lease vanished and is re-created.
        let node_uid = self.lease.node_uid().clone();
        // A renewal: the lease is ours, so it is never created without reading it first.
        let work = async move { ops::acquire_lease(&ctx, &node_uid, LeaseOp::Renew, false).await };
        let span = self.work_span();
        self.tasks
            .spawn_cast_back(myself, span, work, NodeMsg::LeaseRenewed);
    }

    /// A renewal ended.
    pub(super) fn on_renewed(
        &mut self,
        myself: &ActorRef<NodeMsg>,
        result: Result<Lease, LeaseError>,
    ) {
        let duration = self.ctx.config.lease_duration;
        self.lease
            .renewal_ended(&mut self.timers, result.is_ok(), duration);
        if let Ok(lease) = &result {
            self.lease.wrote(lease);
        }
        // A held drain only keeps the lease alive: a failed renewal is tried again at the next
        // interval, with no eviction to pause and no give-up to undo the node a person waits on.
        if !self.stage.guards_node() {
            return;
        }
        match result {
            Ok(_) => {
                let margin = self.pause_margin();
                self.lease.watch_expiry(&mut self.timers, margin);
                if self.status.lease_failures(0) {
                    self.flush_status(myself);
                }
                if self.lease.resume() {
                    self.trace
                        .span()
                        .in_scope(|| tracing::info!("node lease renewed, evictions resume"));
                    self.status.last_error(None);
                    self.flush_status(myself);
                    self.kick(myself);
                }
            }
            Err(err) => {
                self.lease_failed(myself, err);
                if self.stage.guards_node() {
                    // Tried again within seconds, not at the next interval.
                    let config = &self.ctx.config;
                    let max = config.lease_renew_interval.min(Duration::from_secs(60));
                    let base = config.lease_retry_base;
                    self.lease.retry_later(&mut self.timers, base, max);
                }
            }
        }
    }

    /// nmo's node lease is about to expire (its renewals failed): no more evictions for this
    /// node until it is renewed, so that no pod is evicted while another operator may take
    /// the node over.
    pub(super) fn on_lease_expiring(&mut self, myself: &ActorRef<NodeMsg>) {
        let margin = self.pause_margin();
        if !self.stage.guards_node() || !self.lease.expiring(margin) || !self.lease.pause() {
            return;
        }
        self.trace.span().in_scope(|| {
            tracing::warn!("node lease about to expire, evictions paused until it is renewed")
        });
        self.stop_evictions();
        self.status.last_error(Some(format!(
            "the node lease could not be renewed; {EVICTIONS_PAUSED}"
        )));
        self.flush_status(myself);
    }

    /// The lease watch shows the node lease as it is now (None: it does not exist).
    pub(super) fn on_lease_seen(&mut self, myself: &ActorRef<NodeMsg>, lease: Option<Lease>) {
        if !self.stage.keeps_lease() {
            return;
        }
        let config = &self.ctx.config;
        match lease {
            Some(lease) => {
                if let Some(holder) =
                    decisions::held_by_other(&lease, config.now(), config.lease_duration)
                    && self.lease_taken(myself, &holder)
                {
                    // Tried again at once: each attempt that finds it held counts.
                    self.renew_lease(myself, false);
                }
            }
            // Deleted under us (by hand, say): a renewal creates it again now.
            None => self.renew_lease(myself, false),
        }
    }

    /// Another operator holds the node lease (its watch, or a renewal, says so): no eviction
    /// goes out from now on and those waiting in the eviction actor are dropped. True when
    /// this is news.
    fn lease_taken(&mut self, myself: &ActorRef<NodeMsg>, holder: &str) -> bool {
        if !self.lease.taken(holder) {
            return false;
        }
        self.trace.span().in_scope(
            || tracing::warn!(%holder, "node lease taken by another holder, evictions stop"),
        );
        if self.stage.guards_node() {
            self.lease.pause();
            self.stop_evictions();
            self.status.last_error(Some(format!(
                "lease taken by {holder}; {EVICTIONS_STOPPED}"
            )));
            self.flush_status(myself);
        }
        true
    }

    /// Drops every eviction of this node's drain that has not gone out yet.
    fn stop_evictions(&mut self) {
        self.evictions.cancel_all();
        if let Some(drain) = self.stage.drain_mut() {
            drain.forget_asked();
        }
    }

    /// Counts one failure to take or keep the lease; gives up above the limit.
    pub(super) fn lease_failed(&mut self, myself: &ActorRef<NodeMsg>, error: LeaseError) {
        let taken = match &error {
            LeaseError::TakenBy { holder, .. } => {
                let _news = self.lease_taken(myself, holder);
                true
            }
            _ => false,
        };
        let counted = self
            .lease
            .count_failure(self.status.wanted().error_on_lease_count, taken);
        self.status.lease_failures(counted.count);
        if counted.give_up {
            self.give_up(myself, LeaseLost(error));
        } else {
            self.status.last_error(Some(if taken {
                format!("{error}; {EVICTIONS_STOPPED}")
            } else if self.lease.paused() {
                format!("{error}; {EVICTIONS_PAUSED}")
            } else {
                error.to_string()
            }));
            self.flush_status(myself);
        }
    }

    /// Stops the maintenance after repeated lease failures: Failed, and the node undone.
    fn give_up(&mut self, myself: &ActorRef<NodeMsg>, error: LeaseLost) {
        let now = self.now();
        self.set_stage(Stage::Failed {
            why: Failure::LeaseLost,
            undo_due: true,
        });
        self.lease.stop_renewing(&mut self.timers);
        self.watches.stop_node();
        let error = error.to_string();
        self.status
            .maintenance_failed(FailureKind::LeaseLost, error.clone(), now);
        // The undo starts once the API has this (see `decide::Facts::failure_written`): a
        // restart in between finds the undo due in the status and still does it.
        self.status.undo_due(now);
        self.event(EventType::Warning, reasons::FAILED, error);
        self.flush_status(myself);
    }
}
