//! The eviction actor's intercepted side: pods that an admission webhook on `pods/eviction`
//! (or KubeVirt, for a launcher pod) acts on are asked as soon as their drain asks, whatever
//! their budget's status says, and asked again with backoff ([`super::reask`]) after every
//! refusal until they leave the node. A refusal of any code by a webhook is such a refusal,
//! never a failure. The budget-driven release stays: an intercepted pod waiting between two
//! re-asks goes the moment its budget allows. (Why: [`crate::interception`].)

use futures::StreamExt;
use ractor::ActorRef;
use rand::Rng;
use tokio::time::Instant;

use super::EvictionState;
use super::gate::gate_key;
use super::held::{Held, Where};
use super::messages::{EvictionMsg, EvictionReply, EvictionRequest, Wake, WatchKind};
use super::pdb_gates::PodFacts;
use super::reask::{Reasks, reask_delay};
use crate::diagnosis::Blocker;
use crate::interception::{EvictionWebhooks, Interception};
use crate::model::PodRef;
use crate::task::TaskSlot;
use crate::timers::Timers;

/// What the eviction actor knows of interceptors, and its plan of re-asks.
#[derive(Debug, Default)]
pub(super) struct Interceptors {
    /// The webhooks on `pods/eviction`, as last listed.
    webhooks: EvictionWebhooks,
    /// The task forwarding their watch.
    watch: TaskSlot,
    /// When each intercepted pod is asked again.
    reasks: Reasks,
}

impl Interceptors {
    /// Who may act on `req`'s eviction.
    pub(super) fn for_request(&self, req: &EvictionRequest) -> Interception {
        self.webhooks.for_pod(&req.labels, req.controller.as_ref())
    }

    /// Plans the re-ask of `pod` after its `refusals`-th refusal in a row.
    fn plan(&mut self, timers: &mut Timers<EvictionMsg>, pod: PodRef, refusals: u32) {
        let jitter: f64 = rand::rng().random_range(0.8..=1.0);
        self.reasks
            .schedule(pod, Instant::now() + reask_delay(refusals, jitter));
        self.arm(timers);
    }

    /// No re-ask for `pod` (its request ended, was withdrawn or cancelled).
    pub(super) fn forget(&mut self, pod: &PodRef) {
        self.reasks.forget(pod);
    }

    /// Sets the timer for the earliest re-ask, unless one at least as early is set.
    fn arm(&self, timers: &mut Timers<EvictionMsg>) {
        let Some(next) = self.reasks.next() else {
            return;
        };
        let after = next.saturating_duration_since(Instant::now());
        timers.set_unless_sooner(Wake::Reask, after);
    }

    /// Stops the watch (the actor stops).
    pub(super) fn stop(&mut self) {
        self.watch.clear();
    }

    /// Re-asks planned (introspection).
    pub(super) fn planned(&self) -> usize {
        self.reasks.len()
    }
}

impl EvictionState {
    /// Subscribes to the watch of admission webhooks on `pods/eviction`.
    pub(super) fn watch_webhooks(&mut self, myself: &ActorRef<EvictionMsg>) {
        let mut changes = self.cluster.watch_eviction_webhooks();
        let me = myself.clone();
        let task = tokio::spawn(async move {
            while let Some(webhooks) = changes.next().await {
                if me.cast(EvictionMsg::Webhooks(webhooks)).is_err() {
                    return;
                }
            }
            let _ = me.cast(EvictionMsg::WatchEnded(WatchKind::Webhooks));
        });
        self.interceptors.watch.set(task);
    }

    /// The webhooks on `pods/eviction` are now `webhooks`: a held request that something now
    /// intercepts, and that waits on its budget, is asked at once.
    pub(super) fn on_webhooks(
        &mut self,
        myself: &ActorRef<EvictionMsg>,
        webhooks: EvictionWebhooks,
    ) {
        if webhooks.names != self.interceptors.webhooks.names {
            tracing::info!(webhooks = ?webhooks.names, "admission webhooks on pods/eviction");
        }
        self.interceptors.webhooks = webhooks;
        let mut now_intercepted = Vec::new();
        for (pod, held) in self.requests.iter_mut() {
            let interception = self.interceptors.for_request(held.req());
            let newly = held.intercepted_as(interception);
            if newly && held.is_waiting() {
                now_intercepted.push(pod.clone());
            }
        }
        for pod in now_intercepted {
            self.take_off_waiting_lists(&pod);
            self.ask_now(&pod);
        }
        self.forget_unblocked();
        self.pump(myself);
    }

    /// Takes in a new request that something intercepts: it is sent now, whatever its budget
    /// says (an allowance the budget has is used, and counted, as for any other request).
    pub(super) fn enqueue_intercepted(&mut self, mut held: Held) {
        let pod = held.req().pod.clone();
        held.move_to(Where::Ready);
        self.requests.arrived(held);
        self.ask_now(&pod);
    }

    /// Queues the held request for `pod` to be sent, reserving its budget's allowance if it
    /// has one. (The budget is not asked to wait: the API server decides.)
    fn ask_now(&mut self, pod: &PodRef) {
        let Some(held) = self.requests.get_mut(pod) else {
            return;
        };
        let facts = PodFacts {
            labels: &held.req().labels,
            healthy: held.req().healthy,
            unstarted: held.req().unstarted,
        };
        // Reserves an allowance if there is one; a `Wait` is ignored (sent anyway).
        let _ = self.pdbs.admit(pod, facts);
        held.move_to(Where::Ready);
        self.requests.queue(pod.clone());
    }

    /// `pod` leaves the budgets' and gates' lists (it is sent by the re-ask instead).
    fn take_off_waiting_lists(&mut self, pod: &PodRef) {
        self.pdbs.retain_waiting(|waiting| waiting != pod);
        self.gates.retain_parked(|parked| parked != pod);
        if let Some(key) = self.gates.forget(pod) {
            self.timers.cancel(&Wake::GateOpen(key));
        }
    }

    /// An intercepted request was refused (by a webhook, named in `webhook`, or by its budget
    /// `pdb` after the webhooks let it through): it waits for its re-ask, and for its budget if
    /// the budget refused; its asker hears the refusal's own words.
    pub(super) fn intercepted_refusal(
        &mut self,
        mut held: Box<Held>,
        pdb: Option<String>,
        message: String,
    ) {
        self.tally.intercepted();
        let pod = held.req().pod.clone();
        let refusals = held.refused_while_intercepted();
        if let Some(name) = &pdb {
            self.pdbs.wait(&gate_key(&pod, Some(name)), pod.clone());
        }
        let by = held.interception().who();
        held.tell_blocked(EvictionReply::Blocked {
            pdb,
            message: message.clone(),
            blocker: Some(Blocker::EvictionIntercepted { by, message }),
        });
        self.requests.held_again(held);
        self.interceptors.plan(&mut self.timers, pod, refusals);
    }

    /// Re-asks are due: each intercepted pod still waiting is sent again; one no longer
    /// intercepted (its webhook went away) is decided on its budget like any other.
    pub(super) fn reask_due(&mut self, myself: &ActorRef<EvictionMsg>) {
        for pod in self.interceptors.reasks.take_due(Instant::now()) {
            let Some(held) = self.requests.get(&pod) else {
                continue;
            };
            if !held.is_waiting() {
                continue;
            }
            let intercepted = held.interception().is_intercepted();
            self.take_off_waiting_lists(&pod);
            if intercepted {
                self.ask_now(&pod);
            } else if self.decide(&pod) {
                self.requests.queue(pod);
            }
        }
        self.interceptors.arm(&mut self.timers);
        self.forget_unblocked();
        self.pump(myself);
    }
}
