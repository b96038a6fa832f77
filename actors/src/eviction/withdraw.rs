//! Withdrawing one request: its pod left the node, or its name now belongs to another pod.
//! Nothing of it may linger: a request left behind a budget would be sent when the budget
//! allows, to whatever pod has the name by then.

use super::EvictionState;
use super::held::Where;
use super::messages::Wake;
use crate::model::{PodRef, Uid};

impl EvictionState {
    /// Forgets the request for `pod` if it names the pod with `uid` (a request for a newer pod
    /// of that name stays). An unsent one frees its place in its budget; the outcome of a call
    /// already out is dropped when it returns (its uid precondition keeps it off any other pod).
    pub(super) fn withdraw(&mut self, pod: &PodRef, uid: &Uid) {
        let Some(held) = self.requests.get(pod).filter(|h| h.req().uid == *uid) else {
            return;
        };
        let unsent = held.at() != Where::InFlight;
        if let Some(span) = held.attempt_span() {
            span.record("nmo.outcome", "withdrawn");
        }
        self.requests.withdrawn(pod);
        self.interceptors.forget(pod);
        // The ready queue skips requests no longer held; the gates and the budgets' lists
        // would keep the pod and count it as blocked.
        self.gates.retain_parked(|parked| parked != pod);
        if let Some(key) = self.gates.forget(pod) {
            self.timers.cancel(&Wake::GateOpen(key));
        }
        if unsent {
            self.pdbs.forget(pod);
        } else {
            self.pdbs.retain_waiting(|waiting| waiting != pod);
        }
        self.forget_unblocked();
    }
}
