//! A short-lived, process-wide memory of which DaemonSets exist (and their uid: one deleted
//! and created again under the same name is another DaemonSet). Every node runs a pod of each
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
/// The uid of the DaemonSet of that name (None: there is none), and when it was read.
type Slot = Arc<tokio::sync::Mutex<Option<(Option<String>, Instant)>>>;

/// The memory; clones share it.
#[derive(Clone, Default)]
pub struct DaemonSetCache {
    slots: Arc<Mutex<HashMap<Key, Slot>>>,
}

impl DaemonSetCache {
    /// Whether the DaemonSet `namespace/name` with uid `uid` exists (empty `uid`: any of that
    /// name): from memory when fresh, else from `lookup` (which reads the uid of the
    /// DaemonSet of that name, None when there is none). Concurrent callers for the same
    /// DaemonSet wait for one lookup instead of each making their own.
    ///
    /// Only a remembered match is trusted for the whole [`TTL`]: a pod naming a uid the memory
    /// does not have may belong to a DaemonSet created again since (its pods are not the old
    /// one's orphans), so the memory is read again, unless that read happened while this
    /// caller waited for it.
    pub async fn exists<E, F>(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        lookup: F,
    ) -> Result<bool, E>
    where
        F: Future<Output = Result<Option<String>, E>>,
    {
        let asked = Instant::now();
        let matches = |found: &Option<String>| {
            found
                .as_deref()
                .is_some_and(|found| uid.is_empty() || found == uid)
        };
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots
                .entry((namespace.to_string(), name.to_string()))
                .or_default()
                .clone()
        };
        let mut answer = slot.lock().await;
        if let Some((found, at)) = answer.as_ref()
            && at.elapsed() < TTL
            && (matches(found) || *at > asked)
        {
            return Ok(matches(found));
        }
        // Errors are not remembered: the next caller asks again.
        let found = lookup.await?;
        let exists = matches(&found);
        *answer = Some((found, Instant::now()));
        Ok(exists)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    async fn ask(cache: &DaemonSetCache, calls: &AtomicUsize, answer: bool) -> bool {
        ask_uid(cache, calls, "", answer.then_some("uid-agent")).await
    }

    async fn ask_uid(
        cache: &DaemonSetCache,
        calls: &AtomicUsize,
        uid: &str,
        answer: Option<&str>,
    ) -> bool {
        cache
            .exists::<(), _>("kube-system", "agent", uid, async {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok(answer.map(str::to_string))
            })
            .await
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_uid_the_memory_does_not_have_is_read_again() {
        let cache = DaemonSetCache::default();
        let calls = AtomicUsize::new(0);
        assert!(!ask_uid(&cache, &calls, "old", None).await, "gone");
        assert!(
            ask_uid(&cache, &calls, "new", Some("new")).await,
            "created again since: read again"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert!(ask_uid(&cache, &calls, "new", None).await, "remembered");
        assert!(!ask_uid(&cache, &calls, "old", Some("new")).await);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
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
            .exists("ns", "ds", "u", async {
                Err::<Option<String>, &str>("timeout")
            })
            .await;
        assert_eq!(failed, Err("timeout"));
        let ok = cache
            .exists("ns", "ds", "u", async {
                Ok::<_, &str>(Some("u".to_string()))
            })
            .await;
        assert_eq!(ok, Ok(true));
    }
}
