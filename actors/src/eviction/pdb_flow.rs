//! The eviction actor's PDB-driven side: taking in the PDB watch, deciding each request
//! on its PDB's status, releasing waiting pods when a status changes, and explaining why a
//! PDB blocks (see [`super::pdb_gates`] and [`super::diagnoses`] for the decisions).

use futures::StreamExt;
use ractor::ActorRef;
use tokio::time::Instant;

use super::EvictionState;
use super::held::Where;
use super::messages::{EvictionMsg, EvictionReply, Wake, WatchKind};
use super::pdb_gates::{Admission, PodFacts};
use crate::diagnosis::{Blocker, Investigation, investigate};
use crate::model::PodRef;
use crate::pdb::{Pdb, PdbChange, structural};

/// What the PDB's own spec and status say, before any read.
fn first_look(pdb: &Pdb) -> Blocker {
    if let Some(why) = structural(pdb) {
        return Blocker::StructuralBudget {
            pdb: pdb.name.clone(),
            why,
        };
    }
    match pdb.fresh_status() {
        Some(status) => Blocker::WaitingForReplacement {
            pdb: pdb.name.clone(),
            replacement: None,
            healthy: status.current_healthy,
            desired: status.desired_healthy,
        },
        None => Blocker::BudgetExhausted {
            pdb: Some(pdb.name.clone()),
            message: pdb.refusal_message(),
        },
    }
}

impl EvictionState {
    /// Subscribes to the shared PDB watch; its changes come back as messages.
    pub(super) fn watch_pdbs(&mut self, myself: &ActorRef<EvictionMsg>) {
        let mut changes = self.cluster.watch_pdbs();
        let me = myself.clone();
        let task = tokio::spawn(async move {
            while let Some(change) = changes.next().await {
                if me.cast(EvictionMsg::Pdbs(change)).is_err() {
                    return;
                }
            }
            // Ended: subscribed again a little later.
            let _ = me.cast(EvictionMsg::WatchEnded(WatchKind::Pdbs));
        });
        self.pdb_watch.set(task);
    }

    /// Stops the PDB watch (the actor stops).
    pub(super) fn stop_watching_pdbs(&mut self) {
        self.pdb_watch.clear();
    }

    /// Decides a held request on its PDB's status: true when it is to be sent (the caller
    /// queues it); otherwise it now waits, and its asker was told why.
    pub(super) fn decide(&mut self, pod: &PodRef) -> bool {
        let Some(held) = self.requests.get(pod) else {
            return false;
        };
        // An intercepted pod waits on its budget only between its re-asks, and keeps the
        // words of its last refusal (the diagnosis of a budget an interceptor works behind,
        // KubeVirt's or Strimzi's, would call it structural).
        let intercepted = held.interception().is_intercepted();
        let facts = PodFacts {
            labels: &held.req().labels,
            healthy: held.req().healthy,
            unstarted: held.req().unstarted,
        };
        match self.pdbs.admit(pod, facts) {
            Admission::Free | Admission::Reserved(_) | Admission::Fallback => {
                if let Some(held) = self.requests.get_mut(pod) {
                    held.move_to(Where::Ready);
                }
                true
            }
            Admission::Wait(key) if intercepted => {
                self.pdbs.wait(&key, pod.clone());
                if let Some(held) = self.requests.get_mut(pod) {
                    held.move_to(Where::Waiting);
                }
                false
            }
            Admission::Several(_) if intercepted => {
                self.pdbs.contest(pod.clone());
                if let Some(held) = self.requests.get_mut(pod) {
                    held.move_to(Where::Waiting);
                }
                false
            }
            Admission::Wait(key) => {
                self.tally.waited_on_pdb();
                self.pdbs.wait(&key, pod.clone());
                let reply = self.pdbs.pdb(&key).map(|b| EvictionReply::Blocked {
                    pdb: Some(b.name.clone()),
                    message: b.refusal_message(),
                    blocker: None,
                });
                let blocker = self.blocker_for(&key);
                if let Some(held) = self.requests.get_mut(pod) {
                    held.move_to(Where::Waiting);
                    if let Some(EvictionReply::Blocked { pdb, message, .. }) = reply {
                        held.tell_blocked(EvictionReply::Blocked {
                            pdb,
                            message,
                            blocker,
                        });
                    }
                }
                self.note_blocked(&key);
                false
            }
            Admission::Several(pdbs) => {
                self.pdbs.contest(pod.clone());
                let blocker = Blocker::MultipleBudgets { pdbs };
                if let Some(held) = self.requests.get_mut(pod) {
                    held.move_to(Where::Waiting);
                    held.tell_blocked(EvictionReply::Blocked {
                        pdb: None,
                        message: blocker.to_string(),
                        blocker: Some(blocker),
                    });
                }
                false
            }
        }
    }

    /// The PDB watch reported a change: waiting pods of the namespaces concerned (and pods
    /// parked behind the 429 backoff of a PDB whose status changed) are decided again,
    /// oldest first, and those now allowed go to the front of the queue.
    pub(super) fn on_pdbs(&mut self, myself: &ActorRef<EvictionMsg>, change: PdbChange) {
        let now = Instant::now();
        let changed: Vec<String> = match &change {
            PdbChange::Listed(pdbs) => pdbs.iter().map(Pdb::key).collect(),
            PdbChange::Applied(pdb) => vec![pdb.key()],
            PdbChange::Deleted { namespace, name } => vec![format!("{namespace}/{name}")],
        };
        let mut again = self.pdbs.apply(change);
        for key in &changed {
            again.extend(self.gates.release(key));
            self.timers.cancel(&Wake::GateOpen(key.clone()));
            if let Some(at) = self.diagnoses.changed(key, now) {
                self.schedule_diagnosis(key, at);
            }
        }
        self.decide_again(again);
        self.forget_unblocked();
        self.pump(myself);
    }

    /// PDB `key`'s status changed while a call it refused was out: the pods parked behind
    /// its backoff are decided again on the status now known, as [`Self::on_pdbs`] does.
    pub(super) fn status_changed_under(&mut self, myself: &ActorRef<EvictionMsg>, key: &str) {
        let again = self.gates.release(key);
        self.timers.cancel(&Wake::GateOpen(key.to_string()));
        self.decide_again(again);
        self.pump(myself);
    }

    /// Decides `pods` again, oldest first; the ones to send go to the front of the queue in
    /// that order (a PDB's allowance is not left waiting behind unrelated requests).
    fn decide_again(&mut self, mut pods: Vec<PodRef>) {
        pods.retain(|pod| self.requests.get(pod).is_some_and(|h| h.is_waiting()));
        pods.sort_by_key(|pod| self.requests.get(pod).map_or(u64::MAX, |h| h.seq()));
        pods.dedup();
        let mut go = Vec::new();
        for pod in pods {
            if self.decide(&pod) {
                go.push(pod);
            }
        }
        for pod in go.into_iter().rev() {
            self.requests.queue_first(pod);
        }
    }

    /// What is known of why PDB `key` blocks: the last diagnosis, else what its spec and
    /// status say on their own.
    pub(super) fn blocker_for(&self, key: &str) -> Option<Blocker> {
        if let Some(found) = self.diagnoses.last(key) {
            return Some(found.clone());
        }
        self.pdbs.pdb(key).map(first_look)
    }

    /// Pods wait on PDB `key` (its status, or its 429 backoff): plan a look at why.
    pub(super) fn note_blocked(&mut self, key: &str) {
        if self.pdbs.pdb(key).is_none() {
            return; // Not watched (yet): nothing to read about it.
        }
        if let Some(at) = self.diagnoses.blocked(key, Instant::now()) {
            self.schedule_diagnosis(key, at);
        }
    }

    /// Forgets the diagnoses of PDBs nothing waits on any more.
    pub(super) fn forget_unblocked(&mut self) {
        let blocked: Vec<String> = self.diagnoses.keys().cloned().collect();
        for key in blocked {
            if !self.is_blocked(&key) {
                self.diagnoses.unblocked(&key);
                self.timers.cancel(&Wake::Diagnose(key));
            }
        }
    }

    fn is_blocked(&self, key: &str) -> bool {
        self.pdbs.waiting(key).next().is_some() || self.gates.has_parked(key)
    }

    fn schedule_diagnosis(&mut self, key: &str, at: Instant) {
        let after = at.saturating_duration_since(Instant::now());
        self.timers.set(Wake::Diagnose(key.to_string()), after);
    }

    /// Time to look at why PDB `key` blocks: the reads run in a task of their own.
    pub(super) fn diagnose(&mut self, myself: &ActorRef<EvictionMsg>, key: &str) {
        if !self.is_blocked(key) {
            self.diagnoses.unblocked(key);
            self.timers.cancel(&Wake::Diagnose(key.to_string()));
            return;
        }
        let Some(pdb) = self.pdbs.pdb(key).cloned() else {
            return;
        };
        if !self.diagnoses.start(key, Instant::now()) {
            return;
        }
        // The replacement most likely belongs to the controller of the oldest blocked pod.
        let owner = self
            .pdbs
            .waiting(key)
            .chain(self.gates.parked(key))
            .find_map(|pod| self.requests.get(pod))
            .and_then(|h| h.req().controller.clone());
        let cluster = self.cluster.clone();
        let key = key.to_string();
        let span = tracing::debug_span!("diagnose_budget", pdb = %pdb.key());
        // A task of the actor's: aborted and awaited with its eviction calls when it stops.
        self.calls.spawn_cast_back(
            myself,
            span,
            async move { investigate(cluster.as_ref(), &pdb, owner.as_ref()).await },
            move |investigation| EvictionMsg::Diagnosed { key, investigation },
        );
    }

    /// A look at PDB `key` ended: when it found something new, every request waiting on
    /// the PDB is told.
    pub(super) fn diagnosed(&mut self, key: &str, investigation: Investigation) {
        self.tally.diagnosis_read(investigation.reads);
        self.config.observer.diagnosis_reads(investigation.reads);
        let blocker = match investigation.blocker {
            Ok(blocker) => Some(blocker),
            Err(error) => {
                tracing::debug!(pdb = %key, %error, "cannot read why the budget blocks; retrying");
                None
            }
        };
        let (changed, next) = self.diagnoses.found(key, blocker, Instant::now());
        if let Some(at) = next
            && self.is_blocked(key)
        {
            self.schedule_diagnosis(key, at);
        }
        if changed {
            self.tell_blocked_on(key);
        }
    }

    /// Tells every request waiting on PDB `key` what is known of why.
    fn tell_blocked_on(&mut self, key: &str) {
        let Some(pdb) = self.pdbs.pdb(key) else {
            return;
        };
        let (pdb, message) = (pdb.name.clone(), pdb.refusal_message());
        let blocker = self.blocker_for(key);
        let pods: Vec<PodRef> = self
            .pdbs
            .waiting(key)
            .chain(self.gates.parked(key))
            .cloned()
            .collect();
        for pod in pods {
            if let Some(held) = self
                .requests
                .get_mut(&pod)
                .filter(|h| !h.interception().is_intercepted())
            {
                held.tell_blocked(EvictionReply::Blocked {
                    pdb: Some(pdb.clone()),
                    message: message.clone(),
                    blocker: blocker.clone(),
                });
            }
        }
    }

    /// Plans the next expiry of accepted evictions that the status never showed.
    pub(super) fn schedule_expiry(&mut self) {
        if self.timers.is_set(&Wake::Expire) {
            return;
        }
        if let Some(at) = self.pdbs.next_expiry() {
            let after = at.saturating_duration_since(Instant::now());
            self.timers.set(Wake::Expire, after);
        }
    }

    /// Accepted evictions the status never showed stop counting: their PDBs' waiting pods
    /// are decided again.
    pub(super) fn expire(&mut self, myself: &ActorRef<EvictionMsg>) {
        let (grew, _) = self.pdbs.expire(Instant::now());
        let mut again = Vec::new();
        for key in grew {
            again.extend(self.pdbs.take_waiting(&key));
        }
        self.decide_again(again);
        self.schedule_expiry();
        self.pump(myself);
    }
}
