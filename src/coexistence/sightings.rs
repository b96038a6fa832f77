//! Which leader election leases `135b1886.medik8s.io` say that another operator runs: the pure
//! part of the detection, fed each poll's listing with the local monotonic time.
//!
//! A lease is a sign of life while its record keeps changing: the holder renews it every few
//! seconds (controller-runtime's `--leader-elect-retry-period`, 2 s), so a record that has not
//! changed for its own `leaseDurationSeconds` plus one poll interval belongs to an operator that
//! is gone. As in client-go's election, that is measured on nmo's own clock from when nmo saw
//! the record change, never by comparing another machine's `renewTime` with nmo's clock; only a
//! lease seen for the first time is judged by its `renewTime` (a lease renewed a week ago by an
//! operator long uninstalled is no sign of life). A lease with no holder was released.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

/// What one listed lease says, as far as liveness goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseView {
    /// Its namespace.
    pub namespace: String,
    /// `holderIdentity` (None or empty: released).
    pub holder: Option<String>,
    /// `renewTime`.
    pub renewed: Option<DateTime<Utc>>,
    /// `leaseDurationSeconds`.
    pub duration_seconds: Option<i32>,
    /// Its resourceVersion: a new one means the record changed.
    pub resource_version: String,
}

/// Who holds a lease, from the shape of its holder identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HolderKind {
    /// controller-runtime's `<hostname>_<uuid>`: the Go operator (or another controller-runtime
    /// build of it).
    GoOperator,
    /// nmo's own `<pod>_<16 hex digits>`: another nmo installation.
    Nmo,
    /// Anything else.
    Unknown,
}

impl HolderKind {
    /// Tells the kind from a holder identity.
    pub fn of(holder: &str) -> HolderKind {
        let Some((_, suffix)) = holder.rsplit_once('_') else {
            return HolderKind::Unknown;
        };
        if suffix.len() == 16 && suffix.chars().all(|c| c.is_ascii_hexdigit()) {
            return HolderKind::Nmo;
        }
        let groups: Vec<&str> = suffix.split('-').collect();
        let uuid = groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
            && groups
                .iter()
                .all(|g| g.chars().all(|c| c.is_ascii_hexdigit()));
        if uuid {
            HolderKind::GoOperator
        } else {
            HolderKind::Unknown
        }
    }

    /// How a person would name it.
    pub fn describe(self) -> &'static str {
        match self {
            HolderKind::GoOperator => "the Go Node Maintenance Operator",
            HolderKind::Nmo => "another nmo installation",
            HolderKind::Unknown => "another node maintenance operator",
        }
    }
}

/// A lease that says another operator runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighting {
    /// The lease's namespace.
    pub namespace: String,
    /// Its holder.
    pub holder: String,
    /// What the holder looks like.
    pub kind: HolderKind,
}

impl std::fmt::Display for Sighting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} runs (its leader election lease {}/{} is held by {} and renewed)",
            self.kind.describe(),
            self.namespace,
            crate::leader::LEADER_ELECTION_ID,
            self.holder
        )
    }
}

#[derive(Debug, Clone)]
struct Seen {
    resource_version: String,
    /// When (locally) the record last changed, or the estimate for a first sighting; None:
    /// longer ago than this process can tell.
    changed_at: Option<Instant>,
}

/// The leases seen so far, by namespace.
#[derive(Debug, Default)]
pub struct Sightings {
    seen: BTreeMap<String, Seen>,
}

impl Sightings {
    /// Takes one poll's listing (`leases`, nmo's own already left out) seen at `now` (local)
    /// and `wall`; returns the leases whose holders run, given polls every `interval`.
    pub fn observe(
        &mut self,
        leases: &[LeaseView],
        now: Instant,
        wall: DateTime<Utc>,
        interval: Duration,
    ) -> Vec<Sighting> {
        self.seen
            .retain(|namespace, _| leases.iter().any(|l| &l.namespace == namespace));
        let mut running = Vec::new();
        for lease in leases {
            let changed_at = match self.seen.get(&lease.namespace) {
                Some(seen) if seen.resource_version == lease.resource_version => seen.changed_at,
                Some(_) => Some(now),
                None => first_sighting(lease, now, wall),
            };
            self.seen.insert(
                lease.namespace.clone(),
                Seen {
                    resource_version: lease.resource_version.clone(),
                    changed_at,
                },
            );
            let Some(holder) = lease.holder.as_deref().filter(|h| !h.is_empty()) else {
                continue;
            };
            let duration = lease
                .duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(Duration::ZERO, Duration::from_secs);
            if changed_at.is_some_and(|at| now < at + duration + interval) {
                running.push(Sighting {
                    namespace: lease.namespace.clone(),
                    holder: holder.to_string(),
                    kind: HolderKind::of(holder),
                });
            }
        }
        running
    }
}

/// When a lease seen for the first time last changed, judged by its `renewTime`: now for one
/// renewed in the future (another clock); None for one never renewed or renewed longer ago than
/// the monotonic clock reaches back.
fn first_sighting(lease: &LeaseView, now: Instant, wall: DateTime<Utc>) -> Option<Instant> {
    let renewed = lease.renewed?;
    let age = (wall - renewed).to_std().unwrap_or(Duration::ZERO);
    now.checked_sub(age)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL: Duration = Duration::from_secs(10);
    const GO_HOLDER: &str =
        "nmo-controller-manager-7d9c8f-abcde_1b4e28ba-2fa1-11d2-883f-0016d3cca427";

    fn lease(namespace: &str, holder: &str, renewed: DateTime<Utc>, version: &str) -> LeaseView {
        LeaseView {
            namespace: namespace.into(),
            holder: Some(holder.into()),
            renewed: Some(renewed),
            duration_seconds: Some(15),
            resource_version: version.into(),
        }
    }

    #[test]
    fn holders_are_told_apart_by_the_shape_of_their_identity() {
        assert_eq!(HolderKind::of(GO_HOLDER), HolderKind::GoOperator);
        assert_eq!(
            HolderKind::of("nmo-6b7f9-x2x_00ff00ff00ff00ff"),
            HolderKind::Nmo
        );
        assert_eq!(HolderKind::of("someone"), HolderKind::Unknown);
        assert_eq!(
            HolderKind::of("a_1b4e28ba-2fa1-11d2-883f"),
            HolderKind::Unknown
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_that_keeps_changing_runs_and_one_that_stands_still_is_gone() {
        let mut sightings = Sightings::default();
        let wall = Utc::now();
        let start = Instant::now();
        let seen = sightings.observe(
            &[lease("medik8s", GO_HOLDER, wall, "1")],
            start,
            wall,
            INTERVAL,
        );
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].kind, HolderKind::GoOperator);
        assert!(
            seen[0].to_string().contains("medik8s/135b1886.medik8s.io"),
            "{}",
            seen[0]
        );
        // Renewed between polls: still running, however its renewTime compares with ours.
        let later = start + Duration::from_secs(20);
        let old = wall - chrono::Duration::hours(3);
        let seen = sightings.observe(
            &[lease("medik8s", GO_HOLDER, old, "2")],
            later,
            wall,
            INTERVAL,
        );
        assert_eq!(
            seen.len(),
            1,
            "a skewed clock does not hide a renewing operator"
        );
        // Unchanged for its duration (15 s) plus an interval: gone.
        let still = later + Duration::from_secs(24);
        assert_eq!(
            sightings
                .observe(
                    &[lease("medik8s", GO_HOLDER, old, "2")],
                    still,
                    wall,
                    INTERVAL
                )
                .len(),
            1
        );
        let gone = later + Duration::from_secs(26);
        assert!(
            sightings
                .observe(
                    &[lease("medik8s", GO_HOLDER, old, "2")],
                    gone,
                    wall,
                    INTERVAL
                )
                .is_empty()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_left_long_ago_or_released_is_no_sign_of_life() {
        let mut sightings = Sightings::default();
        let wall = Utc::now();
        let now = Instant::now() + Duration::from_secs(3600);
        let stale = lease("medik8s", GO_HOLDER, wall - chrono::Duration::days(7), "1");
        assert!(sightings.observe(&[stale], now, wall, INTERVAL).is_empty());
        let mut released = lease("other", "", wall, "1");
        released.holder = None;
        assert!(
            sightings
                .observe(&[released], now, wall, INTERVAL)
                .is_empty()
        );
    }
}
