//! The node lease shared with the other medik8s operators: its name, validity, how to take or
//! renew it, and when losing it means giving up.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::model::{LEASE_HOLDER, Lease};

/// Lease name for a node.
pub fn lease_name(node: &str) -> String {
    format!("node-{node}")
}

/// The most a lease's `renewTime` may be ahead of nmo's clock and still count as a renewal
/// (its holder's clock runs ahead of nmo's): the lease's own duration, at most this.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(3600);

/// How far ahead of `now` a lease's `renewTime` may be and still count as renewed: the lease's
/// own duration, at most [`MAX_CLOCK_SKEW`].
fn skew_tolerance(seconds: i32) -> chrono::Duration {
    let max = i64::try_from(MAX_CLOCK_SKEW.as_secs()).unwrap_or(i64::MAX);
    chrono::Duration::seconds(i64::from(seconds).clamp(0, max))
}

/// A lease is valid while `renewTime + leaseDurationSeconds >= now`. A `renewTime` ahead of
/// nmo's clock is its holder's clock running ahead (skew): valid up to the lease's own
/// duration ahead (at most [`MAX_CLOCK_SKEW`]); further ahead it is bogus, and the lease is
/// not valid (see [`renewed_bogusly_ahead`]). (medik8s/common takes any renewTime in the
/// future as invalid, so a holder whose clock is a second ahead would lose its lease.) A lease
/// without renewTime or duration is not valid.
pub fn lease_valid(lease: &Lease, now: DateTime<Utc>) -> bool {
    let (Some(renew), Some(seconds)) = (lease.renew_time, lease.lease_duration_seconds) else {
        return false;
    };
    renew <= now + skew_tolerance(seconds)
        && renew + chrono::Duration::seconds(i64::from(seconds)) >= now
}

/// How far ahead of `now` the lease's `renewTime` is, when it is further ahead than clock skew
/// explains (more than the lease's own duration, or [`MAX_CLOCK_SKEW`]): a bogus value, which
/// nmo does not respect (and says so).
pub fn renewed_bogusly_ahead(lease: &Lease, now: DateTime<Utc>) -> Option<Duration> {
    let (renew, seconds) = (lease.renew_time?, lease.lease_duration_seconds?);
    (renew > now + skew_tolerance(seconds)).then(|| (renew - now).to_std().unwrap_or_default())
}

/// When a lease stops being valid (None if it never was).
pub fn lease_expiry(lease: &Lease) -> Option<DateTime<Utc>> {
    let (renew, seconds) = (lease.renew_time?, lease.lease_duration_seconds?);
    Some(renew + chrono::Duration::seconds(i64::from(seconds)))
}

/// What to do about the node lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseAction {
    /// No lease: create this one.
    Create(Lease),
    /// Write this one (renewal of ours, or take-over of an expired one).
    Update(Lease),
    /// Take over another holder's lease whose `renewTime` is further ahead of nmo's clock
    /// than clock skew explains (see [`renewed_bogusly_ahead`]): write this one, and say so.
    TakeOverBogus {
        /// The lease to write.
        lease: Lease,
        /// The holder identity ("unknown" if unset).
        holder: String,
        /// How far ahead of nmo's clock its `renewTime` was.
        ahead: Duration,
    },
    /// Someone else holds a valid lease: hands off.
    HeldByOther {
        /// The holder identity ("unknown" if unset).
        holder: String,
        /// When their lease expires, if known.
        until: Option<DateTime<Utc>>,
    },
}

/// Decides how to take or renew the lease, like medik8s' lease manager: ours is renewed (a lapsed
/// one of ours is re-acquired), a foreign valid one is respected, a foreign expired one is taken
/// over with `leaseTransitions + 1`.
pub fn plan_lease(
    existing: Option<&Lease>,
    namespace: &str,
    node: &str,
    now: DateTime<Utc>,
    duration: Duration,
) -> LeaseAction {
    let seconds = i32::try_from(duration.as_secs()).unwrap_or(i32::MAX);
    let Some(lease) = existing else {
        return LeaseAction::Create(Lease {
            namespace: namespace.to_string(),
            name: lease_name(node),
            holder_identity: Some(LEASE_HOLDER.to_string()),
            lease_duration_seconds: Some(seconds),
            acquire_time: Some(now),
            renew_time: Some(now),
            lease_transitions: Some(0),
            resource_version: String::new(),
        });
    };
    let ours = lease.holder_identity.as_deref() == Some(LEASE_HOLDER);
    let valid = lease_valid(lease, now);
    if !ours && valid {
        return LeaseAction::HeldByOther {
            holder: lease
                .holder_identity
                .clone()
                .unwrap_or_else(|| "unknown".to_string()),
            until: lease_expiry(lease),
        };
    }
    let mut next = lease.clone();
    if !ours || !valid {
        next.acquire_time = Some(now);
        next.lease_transitions = Some(lease.lease_transitions.unwrap_or(0).saturating_add(1));
    }
    next.holder_identity = Some(LEASE_HOLDER.to_string());
    next.lease_duration_seconds = Some(seconds);
    next.renew_time = Some(now);
    match renewed_bogusly_ahead(lease, now).filter(|_| !ours) {
        Some(ahead) => LeaseAction::TakeOverBogus {
            lease: next,
            holder: lease
                .holder_identity
                .clone()
                .unwrap_or_else(|| "unknown".to_string()),
            ahead,
        },
        None => LeaseAction::Update(next),
    }
}

/// The holder of `lease` when it is someone else's and still valid (as [`plan_lease`] judges
/// it: nmo would leave it alone), None when nmo may hold or take it.
pub fn held_by_other(lease: &Lease, now: DateTime<Utc>, duration: Duration) -> Option<String> {
    match plan_lease(Some(lease), &lease.namespace, "", now, duration) {
        LeaseAction::HeldByOther { holder, .. } => Some(holder),
        // A renewTime bogusly far ahead is no hold: nmo takes such a lease over.
        LeaseAction::Create(_) | LeaseAction::Update(_) | LeaseAction::TakeOverBogus { .. } => None,
    }
}

/// True when the lease is held by nmo (valid or not).
pub fn lease_is_ours(lease: &Lease) -> bool {
    lease.holder_identity.as_deref() == Some(LEASE_HOLDER)
}

/// Result of counting one failure to take or keep the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseFailure {
    /// New `errorOnLeaseCount`.
    pub count: i32,
    /// True when the maintenance must stop (undo and Failed).
    pub give_up: bool,
}

/// How long before nmo's node lease can lapse its evictions pause (a twelfth of the lease:
/// 5 minutes of an hour), so that no pod is evicted while another operator may already take
/// the node over (its clock may run ahead of ours).
pub fn eviction_pause_margin(lease_duration: Duration) -> Duration {
    lease_duration / 12
}

/// Maximum `errorOnLeaseCount` tolerated; one more stops the maintenance.
pub const MAX_LEASE_ERRORS: i32 = 3;

/// Counts a lease failure like NMO: only once evictions began; above 3 the maintenance stops.
pub fn lease_failure(count: i32, evictions_began: bool) -> LeaseFailure {
    if !evictions_began {
        return LeaseFailure {
            count,
            give_up: false,
        };
    }
    let count = count.saturating_add(1);
    LeaseFailure {
        count,
        give_up: count > MAX_LEASE_ERRORS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::at as t;

    fn lease(holder: &str, renew: i64, transitions: i32) -> Lease {
        Lease::test("n1", holder)
            .renewed(t(renew), 3600)
            .transitions(transitions)
            .at_version("7")
    }

    #[test]
    fn lease_validity() {
        let l = lease("x", 0, 0);
        assert!(lease_valid(&l, t(0)));
        assert!(lease_valid(&l, t(3600)));
        assert!(!lease_valid(&l, t(3601)));
        let mut no_renew = l.clone();
        no_renew.renew_time = None;
        assert!(!lease_valid(&no_renew, t(0)));
    }

    #[test]
    fn a_renewal_ahead_of_our_clock_by_up_to_the_lease_duration_is_clock_skew() {
        let l = lease("node-healthcheck", 0, 0);
        for behind in [1, 30, 3600] {
            assert!(
                lease_valid(&l, t(-behind)),
                "nmo's clock {behind} s behind the holder's: still held"
            );
            assert_eq!(renewed_bogusly_ahead(&l, t(-behind)), None);
        }
        assert!(!lease_valid(&l, t(-3601)), "further ahead is bogus");
        assert_eq!(
            renewed_bogusly_ahead(&l, t(-7200)),
            Some(Duration::from_secs(7200))
        );
        // A short lease tolerates as much skew as it lasts.
        let short = Lease::test("n1", "x").renewed(t(0), 15);
        assert!(lease_valid(&short, t(-15)));
        assert!(!lease_valid(&short, t(-16)));
        // A lease for ever tolerates an hour.
        let long = Lease::test("n1", "x").renewed(t(0), i32::MAX);
        assert!(lease_valid(&long, t(-3600)));
        assert!(!lease_valid(&long, t(-3601)));
    }

    #[test]
    fn a_foreign_lease_renewed_bogusly_far_ahead_is_taken_over_and_said() {
        let d = Duration::from_secs(3600);
        let l = lease("node-healthcheck", 10_000, 2);
        let LeaseAction::TakeOverBogus {
            lease: next,
            holder,
            ahead,
        } = plan_lease(Some(&l), "ns", "n1", t(0), d)
        else {
            panic!("expected a take-over of a bogus lease");
        };
        assert_eq!(holder, "node-healthcheck");
        assert_eq!(ahead, Duration::from_secs(10_000));
        assert_eq!(next.holder_identity.as_deref(), Some(LEASE_HOLDER));
        assert_eq!(next.lease_transitions, Some(3));
        assert!(matches!(
            plan_lease(Some(&lease("node-healthcheck", 60, 2)), "ns", "n1", t(0), d),
            LeaseAction::HeldByOther { .. }
        ));
    }

    #[test]
    fn missing_lease_is_created() {
        let d = Duration::from_secs(3600);
        let LeaseAction::Create(l) = plan_lease(None, "ns", "n1", t(5), d) else {
            panic!("expected create");
        };
        assert_eq!(l.name, "node-n1");
        assert_eq!(l.namespace, "ns");
        assert_eq!(l.holder_identity.as_deref(), Some(LEASE_HOLDER));
        assert_eq!(l.lease_duration_seconds, Some(3600));
        assert_eq!(l.renew_time, Some(t(5)));
    }

    #[test]
    fn foreign_valid_lease_is_respected() {
        let d = Duration::from_secs(3600);
        let l = lease("node-healthcheck", 0, 2);
        assert_eq!(
            plan_lease(Some(&l), "ns", "n1", t(10), d),
            LeaseAction::HeldByOther {
                holder: "node-healthcheck".into(),
                until: Some(t(3600))
            }
        );
    }

    #[test]
    fn foreign_expired_lease_is_taken_over_with_transition() {
        let d = Duration::from_secs(3600);
        let l = lease("node-healthcheck", 0, 2);
        let LeaseAction::Update(next) = plan_lease(Some(&l), "ns", "n1", t(4000), d) else {
            panic!("expected take-over");
        };
        assert_eq!(next.holder_identity.as_deref(), Some(LEASE_HOLDER));
        assert_eq!(next.lease_transitions, Some(3));
        assert_eq!(next.acquire_time, Some(t(4000)));
        assert_eq!(next.renew_time, Some(t(4000)));
        assert_eq!(next.resource_version, "7");
    }

    #[test]
    fn own_lease_is_renewed_without_transition() {
        let d = Duration::from_secs(3600);
        let l = lease(LEASE_HOLDER, 0, 1);
        let LeaseAction::Update(next) = plan_lease(Some(&l), "ns", "n1", t(1200), d) else {
            panic!("expected renewal");
        };
        assert_eq!(next.lease_transitions, Some(1));
        assert_eq!(next.acquire_time, Some(t(0)));
        assert_eq!(next.renew_time, Some(t(1200)));
        assert!(lease_is_ours(&next));
    }

    #[test]
    fn a_valid_foreign_lease_is_held_by_its_holder_and_ours_or_an_expired_one_by_nobody() {
        let d = Duration::from_secs(3600);
        let theirs = lease("node-healthcheck", 0, 2);
        assert_eq!(
            held_by_other(&theirs, t(10), d).as_deref(),
            Some("node-healthcheck")
        );
        assert_eq!(held_by_other(&theirs, t(3601), d), None, "expired");
        assert_eq!(held_by_other(&lease(LEASE_HOLDER, 0, 2), t(10), d), None);
    }

    #[test]
    fn lease_errors_count_only_after_evictions_began() {
        assert_eq!(
            lease_failure(0, false),
            LeaseFailure {
                count: 0,
                give_up: false
            }
        );
        assert_eq!(
            lease_failure(2, true),
            LeaseFailure {
                count: 3,
                give_up: false
            }
        );
        assert_eq!(
            lease_failure(3, true),
            LeaseFailure {
                count: 4,
                give_up: true
            }
        );
    }
}
