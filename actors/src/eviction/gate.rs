//! Per-PodDisruptionBudget gates (pure; time is passed in). After a 429 naming a PDB, the
//! pods behind it are parked and the PDB is probed with ONE eviction once its backoff
//! elapsed; an accepted probe lets the next pod go at once, one at a time. A tight PDB so
//! costs one call per backoff step, not one per pod.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use crate::model::PodRef;

/// The gate of a PDB: `<namespace>/<pdb>`, or `<namespace>/<unknown-pdb>` when the API did
/// not name the PDB (the namespace's refusals then share one backoff).
pub(super) fn gate_key(pod: &PodRef, pdb: Option<&str>) -> String {
    match pdb {
        Some(name) => format!("{}/{}", pod.namespace, name),
        None => format!("{}/<unknown-pdb>", pod.namespace),
    }
}

/// Backoff state of one PDB.
#[derive(Debug, Default)]
struct Gate {
    failures: u32,
    open_at: Option<Instant>,
    /// A probe for this gate is queued or in flight.
    probing: bool,
    parked: VecDeque<PodRef>,
}

impl Gate {
    /// A new request behind this gate waits with the parked ones.
    fn holds_back(&self) -> bool {
        self.open_at.is_some() || self.probing
    }
}

/// What an accepted eviction does to the gate of the PDB that refused the pod before.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Accepted {
    /// The pod was never refused (or its gate is gone): nothing.
    NoGate,
    /// Nothing waits behind the PDB any more: its gate is gone.
    Released(String),
    /// Pods wait behind the PDB: its backoff is reset and the next one goes at once (see
    /// [`Gates::open`]).
    Reopened(String),
}

/// Every PDB's gate, and which gate each refused pod sits behind.
#[derive(Debug, Default)]
pub(super) struct Gates {
    gates: HashMap<String, Gate>,
    pod_gate: HashMap<PodRef, String>,
}

impl Gates {
    /// Parks `pod` if a PDB refused it before and its gate is still closed or probing: true
    /// when parked (the request waits with the others).
    pub(super) fn park_if_closed(&mut self, pod: &PodRef) -> bool {
        let gate = self
            .pod_gate
            .get(pod)
            .and_then(|key| self.gates.get_mut(key))
            .filter(|gate| gate.holds_back());
        match gate {
            Some(gate) => {
                gate.parked.push_back(pod.clone());
                true
            }
            None => false,
        }
    }

    /// A PDB refused `pod`: closes its gate for `backoff(failures so far)`. Returns the
    /// gate, and the backoff when newly chosen: refusals of calls that were already in flight
    /// when the gate closed do not lengthen it (the PDB failed once, not once per pod).
    pub(super) fn refused(
        &mut self,
        pod: &PodRef,
        pdb: Option<&str>,
        now: Instant,
        backoff: impl FnOnce(u32) -> Duration,
    ) -> (String, Option<Duration>) {
        let key = gate_key(pod, pdb);
        self.pod_gate.insert(pod.clone(), key.clone());
        let gate = self.gates.entry(key.clone()).or_default();
        let already_closed = gate.open_at.is_some_and(|at| at > now);
        if already_closed && !gate.probing {
            return (key, None);
        }
        gate.probing = false;
        gate.failures = gate.failures.saturating_add(1);
        let delay = backoff(gate.failures);
        gate.open_at = Some(now + delay);
        (key, Some(delay))
    }

    /// Parks a refused request behind gate `key`.
    pub(super) fn park(&mut self, key: &str, pod: PodRef) {
        if let Some(gate) = self.gates.get_mut(key) {
            gate.parked.push_back(pod);
        }
    }

    /// Gate `key` may open (its backoff elapsed, or its PDB accepted): the one pod to probe
    /// the PDB with, taken from the parked ones for which `still_parked` holds (the rest
    /// stay parked until the probe is accepted). None while the backoff runs or a probe is out.
    pub(super) fn open(
        &mut self,
        key: &str,
        now: Instant,
        mut still_parked: impl FnMut(&PodRef) -> bool,
    ) -> Option<PodRef> {
        let gate = self.gates.get_mut(key)?;
        if gate.open_at.is_some_and(|at| at > now) || gate.probing {
            return None;
        }
        let mut probe = None;
        while let Some(pod) = gate.parked.pop_front() {
            if still_parked(&pod) {
                gate.probing = true;
                probe = Some(pod);
                break;
            }
        }
        if !gate.probing && gate.parked.is_empty() {
            // Nothing waits behind this PDB any more; forget its backoff only once a call
            // succeeds (a new request for a known pod would otherwise hammer it again).
            gate.open_at = None;
        }
        probe
    }

    /// `pod` was evicted (or is gone). If a PDB refused it before, that PDB accepts
    /// again: its parked pods go on one at a time, the next at once with the backoff reset.
    /// Releasing them all together would earn a 429 for every pod but one whenever the PDB
    /// allows a single disruption, the usual `maxUnavailable: 1`.
    pub(super) fn accepted(&mut self, pod: &PodRef) -> Accepted {
        let Some(key) = self.pod_gate.remove(pod) else {
            return Accepted::NoGate;
        };
        let Some(gate) = self.gates.get_mut(&key) else {
            return Accepted::NoGate;
        };
        if gate.parked.is_empty() {
            self.gates.remove(&key);
            return Accepted::Released(key);
        }
        gate.failures = 0;
        gate.open_at = None;
        gate.probing = false;
        Accepted::Reopened(key)
    }

    /// The status of PDB `key` changed: its backoff is over and every pod parked behind it
    /// is handed back (to be decided on the status again).
    pub(super) fn release(&mut self, key: &str) -> Vec<PodRef> {
        let Some(gate) = self.gates.remove(key) else {
            return Vec::new();
        };
        self.pod_gate.retain(|_, k| k != key);
        gate.parked.into()
    }

    /// Whether pods are parked behind PDB `key`.
    pub(super) fn has_parked(&self, key: &str) -> bool {
        self.gates.get(key).is_some_and(|g| !g.parked.is_empty())
    }

    /// The pods parked behind PDB `key`.
    pub(super) fn parked(&self, key: &str) -> impl Iterator<Item = &PodRef> {
        self.gates
            .get(key)
            .into_iter()
            .flat_map(|g| g.parked.iter())
    }

    /// Keeps only the parked pods for which `keep` holds (the rest were cancelled).
    pub(super) fn retain_parked(&mut self, mut keep: impl FnMut(&PodRef) -> bool) {
        for gate in self.gates.values_mut() {
            gate.parked.retain(&mut keep);
        }
    }

    /// Forgets every pod for which `held` does not hold (its request was cancelled or ended),
    /// and every gate no held pod sits behind any more; returns the gates forgotten (their
    /// timers can go). Without this, a long run would remember every pod ever refused and
    /// every PDB that ever refused one.
    pub(super) fn prune(&mut self, mut held: impl FnMut(&PodRef) -> bool) -> Vec<String> {
        self.pod_gate.retain(|pod, _| held(pod));
        self.retain_parked(&mut held);
        let referenced: std::collections::HashSet<&String> = self.pod_gate.values().collect();
        let gone: Vec<String> = self
            .gates
            .keys()
            .filter(|key| !referenced.contains(key))
            .cloned()
            .collect();
        for key in &gone {
            self.gates.remove(key);
        }
        gone
    }

    /// Forgets `pod` (its request ended without an eviction), and its gate if no other pod
    /// sits behind it; returns that gate if it was forgotten.
    pub(super) fn forget(&mut self, pod: &PodRef) -> Option<String> {
        let key = self.pod_gate.remove(pod)?;
        let referenced = self.pod_gate.values().any(|k| *k == key);
        let idle = self.gates.get(&key).is_some_and(|g| g.parked.is_empty());
        if referenced || !idle {
            return None;
        }
        self.gates.remove(&key);
        Some(key)
    }

    /// How many PDBs and pods are remembered (introspection, tests).
    pub(super) fn sizes(&self) -> (usize, usize) {
        (self.gates.len(), self.pod_gate.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> PodRef {
        PodRef {
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    fn secs(failures: u32) -> Duration {
        Duration::from_secs(u64::from(failures))
    }

    #[test]
    fn gate_key_names_the_pdb_or_the_namespace() {
        let pod = pod("p");
        assert_eq!(gate_key(&pod, Some("web")), "ns/web");
        assert_eq!(gate_key(&pod, None), "ns/<unknown-pdb>");
    }

    #[test]
    fn a_refusal_closes_the_gate_once_per_backoff() {
        let now = Instant::now();
        let mut gates = Gates::default();
        let (key, delay) = gates.refused(&pod("a"), Some("web"), now, secs);
        assert_eq!((key.as_str(), delay), ("ns/web", Some(secs(1))));
        // Another call that was in flight when the gate closed: same backoff.
        let (_, delay) = gates.refused(&pod("b"), Some("web"), now, secs);
        assert_eq!(delay, None);
        // A new request for a refused pod waits behind the closed gate.
        assert!(gates.park_if_closed(&pod("a")));
        assert!(!gates.park_if_closed(&pod("unknown")));
    }

    #[test]
    fn an_open_gate_sends_one_probe_and_a_refused_probe_backs_off_longer() {
        let now = Instant::now();
        let mut gates = Gates::default();
        let (key, _) = gates.refused(&pod("a"), Some("web"), now, secs);
        gates.park(&key, pod("a"));
        gates.park(&key, pod("b"));
        assert_eq!(gates.open(&key, now, |_| true), None, "backoff running");
        let later = now + secs(1);
        assert_eq!(gates.open(&key, later, |_| true), Some(pod("a")));
        assert_eq!(gates.open(&key, later, |_| true), None, "probe out");
        let (_, delay) = gates.refused(&pod("a"), Some("web"), later, secs);
        assert_eq!(delay, Some(secs(2)));
    }

    #[test]
    fn cancelled_pods_are_skipped_when_choosing_the_probe() {
        let now = Instant::now();
        let mut gates = Gates::default();
        let (key, _) = gates.refused(&pod("a"), None, now, |_| Duration::ZERO);
        gates.park(&key, pod("a"));
        gates.park(&key, pod("b"));
        assert_eq!(gates.open(&key, now, |p| &*p.name != "a"), Some(pod("b")));
    }

    #[test]
    fn an_accepted_probe_reopens_the_gate_for_the_next_pod_only() {
        let now = Instant::now();
        let mut gates = Gates::default();
        let (key, _) = gates.refused(&pod("a"), Some("web"), now, secs);
        gates.park(&key, pod("a"));
        gates.park(&key, pod("b"));
        gates.park(&key, pod("c"));
        let later = now + secs(1);
        let probe = gates.open(&key, later, |_| true);
        assert_eq!(probe, Some(pod("a")));
        assert_eq!(gates.accepted(&pod("a")), Accepted::Reopened(key.clone()));
        assert_eq!(gates.open(&key, later, |_| true), Some(pod("b")));
        assert_eq!(gates.open(&key, later, |_| true), None, "one at a time");
    }

    #[test]
    fn a_pdb_with_nothing_parked_is_released_when_it_accepts() {
        let now = Instant::now();
        let mut gates = Gates::default();
        gates.refused(&pod("a"), Some("web"), now, secs);
        assert_eq!(
            gates.accepted(&pod("a")),
            Accepted::Released("ns/web".into())
        );
        assert!(!gates.park_if_closed(&pod("a")));
        assert_eq!(gates.accepted(&pod("a")), Accepted::NoGate);
    }

    #[test]
    fn pruning_forgets_pods_no_longer_held_and_their_pdbs() {
        let now = Instant::now();
        let mut gates = Gates::default();
        let (web, _) = gates.refused(&pod("a"), Some("web"), now, secs);
        gates.park(&web, pod("a"));
        let (db, _) = gates.refused(&pod("b"), Some("db"), now, secs);
        gates.park(&db, pod("b"));
        assert_eq!(gates.sizes(), (2, 2));
        let gone = gates.prune(|p| &*p.name == "b");
        assert_eq!(gone, vec![web]);
        assert_eq!(gates.sizes(), (1, 1));
        assert!(gates.park_if_closed(&pod("b")), "b still waits behind db");
        assert_eq!(gates.prune(|_| false), vec![db]);
        assert_eq!(gates.sizes(), (0, 0));
    }

    #[test]
    fn forgetting_a_pod_forgets_its_pdb_when_nothing_else_waits_behind_it() {
        let now = Instant::now();
        let mut gates = Gates::default();
        let (web, _) = gates.refused(&pod("a"), Some("web"), now, secs);
        gates.refused(&pod("b"), Some("web"), now, secs);
        gates.park(&web, pod("b"));
        assert_eq!(gates.forget(&pod("a")), None, "b still waits behind web");
        gates.retain_parked(|_| false);
        assert_eq!(gates.forget(&pod("b")), Some(web));
        assert_eq!(gates.sizes(), (0, 0));
    }

    #[test]
    fn retain_parked_forgets_cancelled_pods() {
        let now = Instant::now();
        let mut gates = Gates::default();
        let (key, _) = gates.refused(&pod("a"), None, now, |_| Duration::ZERO);
        gates.park(&key, pod("a"));
        gates.retain_parked(|_| false);
        assert_eq!(gates.open(&key, now, |_| true), None);
    }
}
