//! A short-lived, process-wide memory of which DaemonSets exist. Every node runs a pod of each
//! DaemonSet, so without it each node in maintenance would look up the same DaemonSets (once
//! for its first counts and again in its drain): with it, one GET per DaemonSet serves every
//! node draining at that time, keeping the cost per node flat.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// How long an answer is trusted. A DaemonSet deleted meanwhile only delays the deletion of
/// its orphaned pods (which the garbage collector removes anyway) by this much.
pub const TTL: Duration = Duration::from_secs(10);

type Key = (String, String);
type Slot = Arc<tokio::sync::Mutex<Option<(bool, Instant)>>>;

/// The memory; clones share it.
#[derive(Clone, Default)]
pub struct DaemonSetCache {
    slots: Arc<Mutex<HashMap<Key, Slot>>>,
}

impl DaemonSetCache {
    /// Whether `namespace/name` exists: from memory when fresh, else from `lookup`. Concurrent
    /// callers for the same DaemonSet wait for one lookup instead of each making their own.
    pub async fn exists<E, F>(&self, namespace: &str, name: &str, lookup: F) -> Result<bool, E>
    where
        F: Future<Output = Result<bool, E>>,
    {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots
                .entry((namespace.to_string(), name.to_string()))
                .or_default()
                .clone()
        };
        let mut answer = slot.lock().await;
        if let Some((exists, at)) = *answer
            && at.elapsed() < TTL
        {
            return Ok(exists);
        }
        // Errors are not remembered: the next caller asks again.
        let exists = lookup.await?;
        *answer = Some((exists, Instant::now()));
        Ok(exists)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    async fn ask(cache: &DaemonSetCache, calls: &AtomicUsize, answer: bool) -> bool {
        cache
            .exists::<(), _>("kube-system", "agent", async {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok(answer)
            })
            .await
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn one_lookup_serves_every_caller_until_it_expires() {
        let cache = DaemonSetCache::default();
        let calls = AtomicUsize::new(0);
        assert!(ask(&cache, &calls, true).await);
        assert!(ask(&cache, &calls, false).await, "remembered");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        tokio::time::advance(TTL + Duration::from_millis(1)).await;
        assert!(
            !ask(&cache, &calls, false).await,
            "asked again after the TTL"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn errors_are_not_remembered() {
        let cache = DaemonSetCache::default();
        let failed = cache
            .exists("ns", "ds", async { Err::<bool, &str>("timeout") })
            .await;
        assert_eq!(failed, Err("timeout"));
        let ok = cache
            .exists("ns", "ds", async { Ok::<bool, &str>(true) })
            .await;
        assert_eq!(ok, Ok(true));
    }
}
