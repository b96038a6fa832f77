//! When to explain a blocked PDB (pure; time is passed in). Explaining costs reads, so a
//! PDB is looked at only once it has been blocked for [`FIRST_LOOK`] (most waits for a
//! replacement end sooner), then again at growing intervals while nothing changes, and soon
//! after each change of its status; never twice at once. One explanation serves every pod
//! waiting on the PDB, whichever node it is on.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::diagnosis::Blocker;

/// How long a PDB is blocked before its pods are read.
pub(super) const FIRST_LOOK: Duration = Duration::from_secs(3);
/// The longest interval between two looks at a PDB that stays blocked.
pub(super) const LONGEST_INTERVAL: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Watch {
    next_at: Instant,
    interval: Duration,
    in_flight: bool,
    last: Option<Blocker>,
}

/// The diagnosis schedule of every blocked PDB, and what each was found to be.
#[derive(Debug, Default)]
pub(super) struct Diagnoses {
    pdbs: HashMap<String, Watch>,
}

impl Diagnoses {
    /// PDB `key` has pods waiting; returns when to look at it if a look must be scheduled.
    pub(super) fn blocked(&mut self, key: &str, now: Instant) -> Option<Instant> {
        if self.pdbs.contains_key(key) {
            return None;
        }
        let next_at = now + FIRST_LOOK;
        self.pdbs.insert(
            key.to_string(),
            Watch {
                next_at,
                interval: FIRST_LOOK,
                in_flight: false,
                last: None,
            },
        );
        Some(next_at)
    }

    /// Nothing waits on `key` any more: forget it.
    pub(super) fn unblocked(&mut self, key: &str) {
        self.pdbs.remove(key);
    }

    /// The status of `key` changed while blocked: look again soon (returns when, if sooner
    /// than planned).
    pub(super) fn changed(&mut self, key: &str, now: Instant) -> Option<Instant> {
        let watch = self.pdbs.get_mut(key)?;
        watch.interval = FIRST_LOOK;
        let soon = now + FIRST_LOOK;
        if watch.next_at > soon {
            watch.next_at = soon;
            return Some(soon);
        }
        None
    }

    /// Whether to look at `key` now (its time came and no look is out); marks it looking.
    pub(super) fn start(&mut self, key: &str, now: Instant) -> bool {
        match self.pdbs.get_mut(key) {
            Some(watch) if !watch.in_flight && watch.next_at <= now => {
                watch.in_flight = true;
                true
            }
            _ => false,
        }
    }

    /// A look ended with `blocker` (None: it failed). Returns whether the blocker changed, and
    /// when to look next.
    pub(super) fn found(
        &mut self,
        key: &str,
        blocker: Option<Blocker>,
        now: Instant,
    ) -> (bool, Option<Instant>) {
        let Some(watch) = self.pdbs.get_mut(key) else {
            return (false, None);
        };
        watch.in_flight = false;
        watch.next_at = now + watch.interval;
        watch.interval = (watch.interval * 2).min(LONGEST_INTERVAL);
        let changed = blocker.is_some() && blocker != watch.last;
        if blocker.is_some() {
            watch.last = blocker;
        }
        (changed, Some(watch.next_at))
    }

    /// The blocked PDBs (looked at, or to be).
    pub(super) fn keys(&self) -> impl Iterator<Item = &String> {
        self.pdbs.keys()
    }

    /// What `key` was last found to be.
    pub(super) fn last(&self, key: &str) -> Option<&Blocker> {
        self.pdbs.get(key).and_then(|w| w.last.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting() -> Blocker {
        Blocker::WaitingForReplacement {
            pdb: "web".into(),
            replacement: None,
            healthy: 2,
            desired: 2,
        }
    }

    #[test]
    fn a_pdb_is_looked_at_after_the_first_delay_then_less_and_less_often() {
        let t = Instant::now();
        let mut d = Diagnoses::default();
        assert_eq!(d.blocked("app/web", t), Some(t + FIRST_LOOK));
        assert_eq!(d.blocked("app/web", t), None, "already scheduled");
        assert!(!d.start("app/web", t), "not yet");
        let t1 = t + FIRST_LOOK;
        assert!(d.start("app/web", t1));
        assert!(!d.start("app/web", t1), "one look at a time");
        let (changed, next) = d.found("app/web", Some(waiting()), t1);
        assert!(changed);
        assert_eq!(next, Some(t1 + FIRST_LOOK));
        assert!(d.start("app/web", t1 + FIRST_LOOK));
        let (changed, next) = d.found("app/web", Some(waiting()), t1 + FIRST_LOOK);
        assert!(!changed, "same finding");
        assert_eq!(next, Some(t1 + FIRST_LOOK + FIRST_LOOK * 2));
        assert_eq!(d.last("app/web"), Some(&waiting()));
    }

    #[test]
    fn a_status_change_brings_the_next_look_forward() {
        let t = Instant::now();
        let mut d = Diagnoses::default();
        d.blocked("app/web", t);
        assert_eq!(d.changed("app/web", t), None, "already that soon");
        let t1 = t + FIRST_LOOK;
        d.start("app/web", t1);
        for _ in 0..6 {
            d.found("app/web", None, t1);
        }
        assert_eq!(d.changed("app/web", t1), Some(t1 + FIRST_LOOK));
        d.unblocked("app/web");
        assert_eq!(d.changed("app/web", t1), None);
    }
}
