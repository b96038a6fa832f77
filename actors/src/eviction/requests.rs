//! The requests the eviction actor holds: each pod's request, the queue of those ready to be
//! sent (oldest first, a probe or a released pod at the front), the calls out, and the
//! requests' arrival order. Changed only here, through methods named for what happened.

use std::collections::{HashMap, VecDeque};

use super::held::{Held, Where};
use crate::model::PodRef;

/// Every request held, the ready queue and the calls out.
#[derive(Default)]
pub(super) struct Requests {
    /// Boxed: the map's slots (up to twice the pods held) would each hold a ~0.3 KiB `Held`;
    /// for the 15,000 pods of 500 drains that was 12 MiB of slots, boxed ~2 MiB plus the pods.
    held: HashMap<PodRef, Box<Held>>,
    /// The pods to send, in order; an entry whose request went (or moved) is skipped.
    ready: VecDeque<PodRef>,
    /// Eviction calls out.
    in_flight: usize,
    /// Arrival counter of requests.
    next_seq: u64,
}

impl Requests {
    /// The request held for `pod`.
    pub(super) fn get(&self, pod: &PodRef) -> Option<&Held> {
        self.held.get(pod).map(Box::as_ref)
    }

    /// The request held for `pod`, to change its own record (where it is, what it was told).
    pub(super) fn get_mut(&mut self, pod: &PodRef) -> Option<&mut Held> {
        self.held.get_mut(pod).map(Box::as_mut)
    }

    /// Whether a request is held for `pod`.
    pub(super) fn holds(&self, pod: &PodRef) -> bool {
        self.held.contains_key(pod)
    }

    /// Every request held, to change their records.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&PodRef, &mut Held)> {
        self.held.iter_mut().map(|(pod, held)| (pod, held.as_mut()))
    }

    /// Requests held.
    pub(super) fn len(&self) -> usize {
        self.held.len()
    }

    /// Eviction calls out.
    pub(super) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Requests held and not out: the queue as the metrics show it.
    pub(super) fn waiting(&self) -> usize {
        self.held.len().saturating_sub(self.in_flight)
    }

    /// Pods in the ready queue (stale entries included).
    pub(super) fn queued(&self) -> usize {
        self.ready.len()
    }

    /// A new request arrived: it is held, numbered in arrival order.
    pub(super) fn arrived(&mut self, mut held: Held) {
        self.next_seq += 1;
        held.numbered(self.next_seq);
        self.held.insert(held.req().pod.clone(), Box::new(held));
    }

    /// A request taken out by its answer is held again (it waits, or is to be sent again).
    pub(super) fn held_again(&mut self, held: Box<Held>) {
        self.held.insert(held.req().pod.clone(), held);
    }

    /// `pod`'s request is to be sent, after those queued.
    pub(super) fn queue(&mut self, pod: PodRef) {
        self.ready.push_back(pod);
    }

    /// `pod`'s request is to be sent before those queued (a probe, a pod its budget released,
    /// a call the API server throttled).
    pub(super) fn queue_first(&mut self, pod: PodRef) {
        self.ready.push_front(pod);
    }

    /// The next pod in the queue, if any.
    pub(super) fn next_queued(&self) -> Option<&PodRef> {
        self.ready.front()
    }

    /// The next pod in the queue goes out with the call the caller makes, the PDB watch at
    /// change `change`: its request, unless it is no longer held ready (cancelled, or moved
    /// while queued: the entry is stale and dropped).
    pub(super) fn send_next(&mut self, change: u64) -> Option<&mut Held> {
        let pod = self.ready.pop_front()?;
        let held = self.held.get_mut(&pod)?;
        if held.at() != Where::Ready {
            return None;
        }
        held.sent(change);
        self.in_flight += 1;
        Some(held.as_mut())
    }

    /// The call for `pod` naming `uid` returned: the request it was made for, taken out, if
    /// it is still held and out (one cancelled or withdrawn meanwhile may have been made
    /// again, for another pod of that name too, and that one waits for a call of its own).
    pub(super) fn answered(&mut self, pod: &PodRef, uid: &str) -> Option<Box<Held>> {
        self.in_flight = self.in_flight.saturating_sub(1);
        match self.held.get(pod) {
            Some(h) if h.at() == Where::InFlight && h.req().uid == uid => self.held.remove(pod),
            _ => None,
        }
    }

    /// `pod`'s request is withdrawn: forgotten (the queue skips it).
    pub(super) fn withdrawn(&mut self, pod: &PodRef) {
        self.held.remove(pod);
    }

    /// The requests of `maintenance` are cancelled: forgotten, and their queue entries with
    /// them. Returns the pods cancelled, and which of them had no call out.
    pub(super) fn cancelled(&mut self, maintenance: &str) -> (Vec<PodRef>, Vec<PodRef>) {
        let mut all = Vec::new();
        let mut unsent = Vec::new();
        self.held.retain(|pod, h| {
            if h.req().maintenance != maintenance {
                return true;
            }
            if let Some(span) = h.attempt_span() {
                span.record("nmo.outcome", "cancelled");
            }
            if h.at() != Where::InFlight {
                unsent.push(pod.clone());
            }
            all.push(pod.clone());
            false
        });
        let held = &self.held;
        self.ready.retain(|pod| held.contains_key(pod));
        (all, unsent)
    }
}
