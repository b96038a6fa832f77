//! What every watch of the process is doing: listing, established, or failing (since when, and
//! why). The readiness probe reads it (`observability::health`); each watch reports through
//! the [`WatchReporter`] it registered, which also writes the watch's log lines: one warning
//! when it goes down, one line when it is back, the retries in between at debug level.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Where one watch stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchState {
    /// Listing what it watches (its first list, or a re-list after a failure).
    Listing,
    /// Listed, and watching since.
    Established,
    /// Failed; it lists again after a backoff.
    Failing {
        /// The last failure.
        error: String,
    },
}

/// One watch as the readiness probe sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchStatus {
    /// What it watches ("NodeMaintenances", "pods on node n1").
    pub name: String,
    /// Where it stands.
    pub state: WatchState,
    /// How long it has not been established (zero while it is): since it was registered, or
    /// since it last failed while established.
    pub down_for: Duration,
}

#[derive(Debug)]
struct Entry {
    name: String,
    state: WatchState,
    /// When it last stopped being established (or was registered); None while established.
    down_since: Option<Instant>,
    /// Failures since it was last established.
    failures: u32,
}

#[derive(Debug, Default)]
struct Registry {
    next: u64,
    watches: BTreeMap<u64, Entry>,
}

/// Every watch of the process (one per client; clones share it).
#[derive(Debug, Clone, Default)]
pub struct WatchHealth {
    registry: Arc<Mutex<Registry>>,
}

impl WatchHealth {
    /// A new watch named `name`, listing; it is forgotten when the reporter is dropped.
    pub fn register(&self, name: impl Into<String>) -> WatchReporter {
        let mut registry = self.lock();
        let id = registry.next;
        registry.next += 1;
        registry.watches.insert(
            id,
            Entry {
                name: name.into(),
                state: WatchState::Listing,
                down_since: Some(Instant::now()),
                failures: 0,
            },
        );
        WatchReporter {
            health: self.clone(),
            id,
        }
    }

    /// Every watch now, in registration order.
    pub fn snapshot(&self) -> Vec<WatchStatus> {
        let now = Instant::now();
        self.lock()
            .watches
            .values()
            .map(|entry| WatchStatus {
                name: entry.name.clone(),
                state: entry.state.clone(),
                down_for: entry
                    .down_since
                    .map_or(Duration::ZERO, |since| now.saturating_duration_since(since)),
            })
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One watch's reports; it is forgotten when this is dropped.
#[derive(Debug)]
pub struct WatchReporter {
    health: WatchHealth,
    id: u64,
}

impl WatchReporter {
    fn update(&self, change: impl FnOnce(&mut Entry)) {
        if let Some(entry) = self.health.lock().watches.get_mut(&self.id) {
            change(entry);
        }
    }

    /// The watch (re)lists.
    pub fn listing(&self) {
        self.update(|entry| {
            entry.state = WatchState::Listing;
            entry.down_since.get_or_insert_with(Instant::now);
        });
    }

    /// The watch has listed and watches.
    pub fn established(&self) {
        self.update(|entry| {
            if let Some(since) = entry.down_since.take()
                && entry.failures > 0
            {
                tracing::info!(
                    watch = %entry.name,
                    failures = entry.failures,
                    down_for = ?since.elapsed(),
                    "watch established again"
                );
            }
            entry.state = WatchState::Established;
            entry.failures = 0;
        });
    }

    /// The watch failed with `error`; it lists again in `retry_in`.
    pub fn failed(&self, error: &dyn std::fmt::Display, retry_in: Duration) {
        self.update(|entry| {
            entry.failures += 1;
            entry.down_since.get_or_insert_with(Instant::now);
            if entry.failures == 1 {
                tracing::warn!(watch = %entry.name, %error, ?retry_in, "watch failed; listing again after a backoff");
            } else {
                tracing::debug!(watch = %entry.name, %error, failures = entry.failures, ?retry_in, "watch still failing");
            }
            entry.state = WatchState::Failing {
                error: error.to_string(),
            };
        });
    }
}

impl Drop for WatchReporter {
    fn drop(&mut self) {
        self.health.lock().watches.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_watch_is_down_from_its_registration_or_its_failure_until_established() {
        let health = WatchHealth::default();
        let pods = health.register("pods on node n1");
        tokio::time::advance(Duration::from_secs(2)).await;
        let [listing] = health.snapshot().try_into().expect("one watch");
        assert_eq!(listing.state, WatchState::Listing);
        assert_eq!(listing.down_for, Duration::from_secs(2));

        pods.established();
        assert_eq!(health.snapshot()[0].down_for, Duration::ZERO);
        assert_eq!(health.snapshot()[0].state, WatchState::Established);

        pods.failed(&"connection refused", Duration::from_secs(1));
        tokio::time::advance(Duration::from_secs(3)).await;
        pods.listing();
        let [relisting] = health.snapshot().try_into().expect("one watch");
        assert_eq!(relisting.state, WatchState::Listing);
        assert_eq!(
            relisting.down_for,
            Duration::from_secs(3),
            "down since it failed, not since it re-lists"
        );
        pods.failed(&"connection refused", Duration::from_secs(1));
        assert_eq!(
            health.snapshot()[0].state,
            WatchState::Failing {
                error: "connection refused".into()
            }
        );
        pods.established();
        assert_eq!(health.snapshot()[0].down_for, Duration::ZERO);

        drop(pods);
        assert!(health.snapshot().is_empty(), "a dropped watch is forgotten");
    }
}
