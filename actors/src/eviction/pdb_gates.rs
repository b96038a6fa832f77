//! Gating on the PDBs' observed status (pure; time is passed in).
//!
//! The shared PDB watch tells how many disruptions each PodDisruptionBudget allows. A pod
//! whose PDB allows none is never sent: it waits on its PDB, and the moment the PDB's
//! status changes, exactly as many waiting pods go as it allows, oldest first, whichever node
//! asked (two nodes draining pods of one PDB share its allowance). An eviction sent counts
//! against its PDB until the PDB's status shows it (the API records each accepted
//! eviction in `disruptedPods` and takes it off `disruptionsAllowed` at once), so a burst never
//! overdraws the PDB while the watch catches up.
//!
//! What the status cannot tell falls back to sending and letting a 429 back off (the caller's
//! per-PDB backoff gates): before the first list, a status older than its spec
//! (`observedGeneration < generation`), and a PDB that refused although its status allowed
//! (it is then distrusted until its status changes).
//!
//! (Over 400 lines only with its unit tests below: the code is 373 lines, one decision
//! kept with the cases that pin it.)

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use crate::model::PodRef;
use crate::pdb::{Pdb, PdbChange};

/// How long an accepted eviction counts against its PDB if the PDB's status never shows
/// it (a relist skipped the event, or the API let an unhealthy pod go without counting it).
pub(super) const UNCONFIRMED_TTL: Duration = Duration::from_secs(10);

/// What the eviction actor knows of a pod when deciding.
#[derive(Debug, Clone, Copy)]
pub(super) struct PodFacts<'a> {
    /// Its labels.
    pub(super) labels: &'a BTreeMap<String, String>,
    /// Running and Ready: its PDB counts it as healthy.
    pub(super) healthy: bool,
    /// Pending: the Eviction API deletes it without asking its PDB.
    pub(super) unstarted: bool,
}

/// What to do with an eviction request now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Admission {
    /// No PDB the Eviction API would check: send.
    Free,
    /// Counted against this PDB (key): send.
    Reserved(String),
    /// This PDB (key) allows no disruption now: wait for its status to change.
    Wait(String),
    /// Several PDBs (names) select the pod, which the API refuses: wait for them to change.
    Several(Vec<String>),
    /// The status cannot tell: send, and let a refusal back off.
    Fallback,
}

#[derive(Debug, Clone, Copy)]
struct Unconfirmed {
    /// When the API answered (None: not yet).
    answered: Option<Instant>,
}

#[derive(Debug)]
struct Gate {
    pdb: Pdb,
    unconfirmed: HashMap<PodRef, Unconfirmed>,
    waiting: VecDeque<PodRef>,
    /// A 429 although the status allowed: the status is behind; fall back until it changes.
    distrusted: bool,
    /// [`PdbGates::changes`] when the watch last reported this PDB.
    changed_at: u64,
}

impl Gate {
    fn new(pdb: Pdb) -> Self {
        Gate {
            pdb,
            unconfirmed: HashMap::new(),
            waiting: VecDeque::new(),
            distrusted: false,
            changed_at: 0,
        }
    }

    /// Disruptions left for new evictions: what the status allows minus what was sent since.
    fn allowance(&self) -> i64 {
        let allowed = self
            .pdb
            .fresh_status()
            .map_or(0, |s| i64::from(s.disruptions_allowed));
        allowed - i64::try_from(self.unconfirmed.len()).unwrap_or(i64::MAX)
    }

    /// The status shows the evictions it records in `disruptedPods`: they no longer count.
    fn confirm(&mut self) {
        if let Some(status) = self.pdb.status.as_ref() {
            self.unconfirmed
                .retain(|pod, _| !status.disrupted_pods.contains(&*pod.name));
        }
    }
}

/// Every watched PDB's gate.
#[derive(Debug, Default)]
pub(super) struct PdbGates {
    /// The watch delivered its first list.
    synced: bool,
    gates: BTreeMap<String, Gate>,
    /// Pods selected by several PDBs, waiting for the PDBs to change.
    contested: VecDeque<PodRef>,
    /// How many changes the watch reported so far.
    changes: u64,
}

impl PdbGates {
    /// The PDB of `key`, if watched.
    pub(super) fn pdb(&self, key: &str) -> Option<&Pdb> {
        self.gates.get(key).map(|g| &g.pdb)
    }

    /// The PDB counting an eviction of `pod` (sent or about to be), if any.
    pub(super) fn reserved_by(&self, pod: &PodRef) -> Option<&str> {
        self.gates
            .iter()
            .find(|(_, g)| g.unconfirmed.contains_key(pod))
            .map(|(key, _)| key.as_str())
    }

    /// Decides for `pod`; a `Reserved` admission has already counted it.
    pub(super) fn admit(&mut self, pod: &PodRef, facts: PodFacts<'_>) -> Admission {
        if !self.synced {
            return Admission::Fallback;
        }
        if let Some(key) = self.reserved_by(pod) {
            // Asked again after a failed call: it still holds its place.
            return Admission::Reserved(key.to_string());
        }
        let mut selecting = self
            .gates
            .iter_mut()
            .filter(|(_, g)| g.pdb.selects(&pod.namespace, facts.labels));
        let Some((key, gate)) = selecting.next() else {
            return Admission::Free;
        };
        if let Some((_, other)) = selecting.next() {
            let mut names = vec![gate.pdb.name.clone(), other.pdb.name.clone()];
            names.extend(selecting.map(|(_, g)| g.pdb.name.clone()));
            return Admission::Several(names);
        }
        if facts.unstarted {
            return Admission::Free;
        }
        let Some(status) = gate.pdb.fresh_status() else {
            return Admission::Fallback;
        };
        if gate.distrusted {
            return Admission::Fallback;
        }
        let unhealthy_may_go = gate.pdb.always_allow_unhealthy
            || (status.desired_healthy > 0 && status.current_healthy >= status.desired_healthy);
        if !facts.healthy && unhealthy_may_go {
            // The API deletes it without counting it against the PDB.
            return Admission::Free;
        }
        // Oldest first: a newcomer never overtakes a pod already waiting.
        if gate.allowance() > 0 && gate.waiting.is_empty() {
            gate.unconfirmed
                .insert(pod.clone(), Unconfirmed { answered: None });
            return Admission::Reserved(key.clone());
        }
        Admission::Wait(key.clone())
    }

    /// `pod` waits on PDB `key` (after [`Admission::Wait`]).
    pub(super) fn wait(&mut self, key: &str, pod: PodRef) {
        if let Some(gate) = self.gates.get_mut(key) {
            gate.waiting.push_back(pod);
        }
    }

    /// `pod` waits for its PDBs to change (after [`Admission::Several`]).
    pub(super) fn contest(&mut self, pod: PodRef) {
        self.contested.push_back(pod);
    }

    /// Pods waiting on PDB `key`, oldest first.
    pub(super) fn waiting(&self, key: &str) -> impl Iterator<Item = &PodRef> {
        self.gates
            .get(key)
            .into_iter()
            .flat_map(|g| g.waiting.iter())
    }

    /// How many changes the watch reported so far (a mark for [`PdbGates::changed_since`]).
    pub(super) fn changes(&self) -> u64 {
        self.changes
    }

    /// Whether the watch reported PDB `key` after `mark` (a [`PdbGates::changes`]).
    pub(super) fn changed_since(&self, key: &str, mark: u64) -> bool {
        self.gates.get(key).is_some_and(|g| g.changed_at > mark)
    }

    /// Takes in a change of the watch. Returns the waiting pods to decide again (every pod
    /// waiting in a namespace whose PDBs changed), in no particular order.
    pub(super) fn apply(&mut self, change: PdbChange) -> Vec<PodRef> {
        self.changes = self.changes.saturating_add(1);
        let now = self.changes;
        let namespaces: Vec<String> = match change {
            PdbChange::Listed(pdbs) => {
                self.synced = true;
                let mut gates = BTreeMap::new();
                for pdb in pdbs {
                    let key = pdb.key();
                    let mut gate = self.gates.remove(&key).map_or_else(
                        || Gate::new(pdb.clone()),
                        |mut old| {
                            old.pdb = pdb.clone();
                            old.distrusted = false;
                            // A relist may skip the events that would confirm what was
                            // answered: those count until the TTL no longer.
                            old.unconfirmed.retain(|_, u| u.answered.is_none());
                            old
                        },
                    );
                    gate.confirm();
                    gate.changed_at = now;
                    gates.insert(key, gate);
                }
                let mut readmit: Vec<PodRef> = self.contested.drain(..).collect();
                for (_, gone) in std::mem::replace(&mut self.gates, gates) {
                    readmit.extend(gone.waiting);
                }
                for gate in self.gates.values_mut() {
                    readmit.extend(gate.waiting.drain(..));
                }
                return readmit;
            }
            PdbChange::Applied(pdb) => {
                let namespace = pdb.namespace.clone();
                let gate = self
                    .gates
                    .entry(pdb.key())
                    .or_insert_with(|| Gate::new(pdb.clone()));
                gate.pdb = pdb;
                gate.distrusted = false;
                gate.changed_at = now;
                gate.confirm();
                vec![namespace]
            }
            PdbChange::Deleted { namespace, name } => {
                let key = format!("{namespace}/{name}");
                let mut readmit = Vec::new();
                if let Some(gone) = self.gates.remove(&key) {
                    readmit.extend(gone.waiting);
                }
                readmit.extend(self.take_waiting_in(&namespace));
                return readmit;
            }
        };
        namespaces
            .iter()
            .flat_map(|ns| self.take_waiting_in(ns))
            .collect()
    }

    fn take_waiting_in(&mut self, namespace: &str) -> Vec<PodRef> {
        let mut taken = Vec::new();
        for gate in self
            .gates
            .values_mut()
            .filter(|g| g.pdb.namespace == namespace)
        {
            taken.extend(gate.waiting.drain(..));
        }
        let (theirs, others): (Vec<PodRef>, Vec<PodRef>) = self
            .contested
            .drain(..)
            .partition(|p| *p.namespace == *namespace);
        self.contested = others.into();
        taken.extend(theirs);
        taken
    }

    /// The API answered the eviction of a reserved pod: accepted (it counts until the status
    /// shows it, or the TTL) or not (201 vs anything else).
    pub(super) fn answered(&mut self, pod: &PodRef, accepted: bool, now: Instant) {
        for gate in self.gates.values_mut() {
            if accepted {
                if let Some(u) = gate.unconfirmed.get_mut(pod) {
                    u.answered = Some(now);
                }
            } else {
                gate.unconfirmed.remove(pod);
            }
        }
    }

    /// PDB `key` refused `pod` although its status allowed it: the status is behind. The
    /// PDB is distrusted (its pods take the 429 backoff path) until its status changes.
    pub(super) fn refused(&mut self, pod: &PodRef) -> Option<String> {
        let key = self.reserved_by(pod)?.to_string();
        if let Some(gate) = self.gates.get_mut(&key) {
            gate.unconfirmed.remove(pod);
            gate.distrusted = true;
        }
        Some(key)
    }

    /// Evictions answered longer than [`UNCONFIRMED_TTL`] ago stop counting. Returns the
    /// PDBs whose allowance grew and which have waiting pods; and the time of the next
    /// expiry, if any.
    pub(super) fn expire(&mut self, now: Instant) -> (Vec<String>, Option<Instant>) {
        let mut grew = Vec::new();
        let mut next: Option<Instant> = None;
        for (key, gate) in &mut self.gates {
            let before = gate.unconfirmed.len();
            gate.unconfirmed.retain(|_, u| {
                u.answered
                    .is_none_or(|at| now.saturating_duration_since(at) < UNCONFIRMED_TTL)
            });
            if gate.unconfirmed.len() < before && !gate.waiting.is_empty() {
                grew.push(key.clone());
            }
            for at in gate.unconfirmed.values().filter_map(|u| u.answered) {
                let due = at + UNCONFIRMED_TTL;
                next = Some(next.map_or(due, |n| n.min(due)));
            }
        }
        (grew, next)
    }

    /// When the next accepted eviction stops counting, if any counts on its TTL.
    pub(super) fn next_expiry(&self) -> Option<Instant> {
        self.gates
            .values()
            .flat_map(|g| g.unconfirmed.values().filter_map(|u| u.answered))
            .map(|at| at + UNCONFIRMED_TTL)
            .min()
    }

    /// Takes the waiting pods of `key` out (to decide again).
    pub(super) fn take_waiting(&mut self, key: &str) -> Vec<PodRef> {
        self.gates
            .get_mut(key)
            .map(|g| g.waiting.drain(..).collect())
            .unwrap_or_default()
    }

    /// Forgets `pod`: cancelled before its call went out (its reservation, if any, is freed).
    pub(super) fn forget(&mut self, pod: &PodRef) {
        for gate in self.gates.values_mut() {
            gate.waiting.retain(|p| p != pod);
            if gate
                .unconfirmed
                .get(pod)
                .is_some_and(|u| u.answered.is_none())
            {
                gate.unconfirmed.remove(pod);
            }
        }
        self.contested.retain(|p| p != pod);
    }

    /// Keeps only the waiting pods for which `keep` holds (the rest were cancelled).
    pub(super) fn retain_waiting(&mut self, mut keep: impl FnMut(&PodRef) -> bool) {
        for gate in self.gates.values_mut() {
            gate.waiting.retain(&mut keep);
        }
        self.contested.retain(&mut keep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pdb::PdbStatus;

    fn pod(name: &str) -> PodRef {
        PodRef {
            namespace: "app".into(),
            name: name.into(),
        }
    }

    fn web() -> BTreeMap<String, String> {
        BTreeMap::from([("app".to_string(), "web".to_string())])
    }

    fn healthy(labels: &BTreeMap<String, String>) -> PodFacts<'_> {
        PodFacts {
            labels,
            healthy: true,
            unstarted: false,
        }
    }

    fn pdb(name: &str, allowed: i32, disrupted: &[&str]) -> Pdb {
        Pdb::test(
            name,
            PdbStatus {
                observed_generation: 1,
                disruptions_allowed: allowed,
                current_healthy: 3,
                desired_healthy: 3 - allowed,
                expected_pods: 3,
                disrupted_pods: disrupted.iter().map(|d| d.to_string()).collect(),
                sync_failed: None,
            },
        )
    }

    fn listed(pdbs: Vec<Pdb>) -> PdbGates {
        let mut gates = PdbGates::default();
        assert!(gates.apply(PdbChange::Listed(pdbs)).is_empty());
        gates
    }

    #[test]
    fn before_the_first_list_everything_falls_back() {
        let mut gates = PdbGates::default();
        assert_eq!(gates.admit(&pod("a"), healthy(&web())), Admission::Fallback);
    }

    #[test]
    fn a_pdb_releases_exactly_what_it_allows_and_counts_what_was_sent() {
        let labels = web();
        let mut gates = listed(vec![pdb("web", 1, &[])]);
        assert_eq!(
            gates.admit(&pod("a"), healthy(&labels)),
            Admission::Reserved("app/web".into())
        );
        // The status still says 1: the eviction of `a` has not reached it yet.
        assert_eq!(
            gates.admit(&pod("b"), healthy(&labels)),
            Admission::Wait("app/web".into())
        );
        gates.wait("app/web", pod("b"));
        // The API took `a` off the PDB: the status shows it, and allows none.
        let readmit = gates.apply(PdbChange::Applied(pdb("web", 0, &["a"])));
        assert_eq!(readmit, [pod("b")]);
        assert_eq!(
            gates.admit(&pod("b"), healthy(&labels)),
            Admission::Wait("app/web".into())
        );
        gates.wait("app/web", pod("b"));
        // A replacement became ready: one more disruption.
        let readmit = gates.apply(PdbChange::Applied(pdb("web", 1, &[])));
        assert_eq!(readmit, [pod("b")]);
        assert_eq!(
            gates.admit(&pod("b"), healthy(&labels)),
            Admission::Reserved("app/web".into())
        );
    }

    #[test]
    fn an_accepted_eviction_the_status_never_shows_stops_counting_after_a_while() {
        let labels = web();
        let start = Instant::now();
        let mut gates = listed(vec![pdb("web", 1, &[])]);
        gates.admit(&pod("a"), healthy(&labels));
        gates.answered(&pod("a"), true, start);
        assert!(matches!(
            gates.admit(&pod("b"), healthy(&labels)),
            Admission::Wait(_)
        ));
        gates.wait("app/web", pod("b"));
        let (grew, next) = gates.expire(start + Duration::from_secs(1));
        assert!(grew.is_empty());
        assert_eq!(next, Some(start + UNCONFIRMED_TTL));
        let (grew, next) = gates.expire(start + UNCONFIRMED_TTL);
        assert_eq!((grew, next), (vec!["app/web".to_string()], None));
    }

    #[test]
    fn a_refused_eviction_frees_its_place_and_distrusts_the_pdb_until_it_changes() {
        let labels = web();
        let mut gates = listed(vec![pdb("web", 1, &[])]);
        gates.admit(&pod("a"), healthy(&labels));
        assert_eq!(gates.refused(&pod("a")), Some("app/web".into()));
        assert_eq!(
            gates.admit(&pod("a"), healthy(&labels)),
            Admission::Fallback
        );
        gates.apply(PdbChange::Applied(pdb("web", 1, &[])));
        assert!(matches!(
            gates.admit(&pod("a"), healthy(&labels)),
            Admission::Reserved(_)
        ));
    }

    #[test]
    fn a_stale_status_falls_back_to_the_429_path() {
        let labels = web();
        let mut stale = pdb("web", 0, &[]);
        stale.generation = 2;
        let mut gates = listed(vec![stale]);
        assert_eq!(
            gates.admit(&pod("a"), healthy(&labels)),
            Admission::Fallback
        );
    }

    #[test]
    fn pods_no_pdb_selects_unstarted_pods_and_spare_unhealthy_pods_go_freely() {
        let mut gates = listed(vec![pdb("web", 0, &[])]);
        let other = BTreeMap::from([("app".to_string(), "db".to_string())]);
        assert_eq!(gates.admit(&pod("db-0"), healthy(&other)), Admission::Free);
        let labels = web();
        let unstarted = PodFacts {
            unstarted: true,
            healthy: false,
            ..healthy(&labels)
        };
        assert_eq!(gates.admit(&pod("new"), unstarted), Admission::Free);
        // 3 healthy, 3 desired: an unready pod is not counted and may go.
        let unready = PodFacts {
            healthy: false,
            ..healthy(&labels)
        };
        assert_eq!(gates.admit(&pod("sick"), unready), Admission::Free);
    }

    #[test]
    fn several_pdbs_are_named_and_their_pods_wait_for_a_change() {
        let labels = web();
        let mut gates = listed(vec![pdb("web", 1, &[]), pdb("web-too", 1, &[])]);
        assert_eq!(
            gates.admit(&pod("a"), healthy(&labels)),
            Admission::Several(vec!["web".into(), "web-too".into()])
        );
        gates.contest(pod("a"));
        let readmit = gates.apply(PdbChange::Deleted {
            namespace: "app".into(),
            name: "web-too".into(),
        });
        assert_eq!(readmit, [pod("a")]);
        assert!(matches!(
            gates.admit(&pod("a"), healthy(&labels)),
            Admission::Reserved(_)
        ));
    }

    #[test]
    fn a_cancelled_pod_frees_an_unsent_reservation() {
        let labels = web();
        let mut gates = listed(vec![pdb("web", 1, &[])]);
        gates.admit(&pod("a"), healthy(&labels));
        gates.forget(&pod("a"));
        assert!(matches!(
            gates.admit(&pod("b"), healthy(&labels)),
            Admission::Reserved(_)
        ));
    }
}
