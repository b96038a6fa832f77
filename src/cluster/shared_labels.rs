//! One copy of each distinct set of pod labels.
//!
//! The pods of a ReplicaSet, a Deployment's revision or a DaemonSet carry the same labels (the
//! template's), and a drain keeps every pod of its node. A label map costs ~0.6 KiB however few
//! labels it has (a B-tree node is allocated whole): at 500 drains of 30 pods, one map per pod
//! was the largest item of nmo's heap. Pods with equal labels share one map instead; a map lives
//! as long as a pod holding it, and forgotten entries are swept as the table grows.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};

use nmo_actors::model::Labels;

type Map = BTreeMap<String, String>;

/// The label sets in use, by the hash of their contents.
#[derive(Default)]
struct Table {
    by_hash: HashMap<u64, Vec<Weak<Map>>>,
    /// Entries (live or not) at which the next sweep happens.
    sweep_at: usize,
    entries: usize,
}

impl Table {
    fn shared(&mut self, labels: &Map) -> Labels {
        let mut hasher = DefaultHasher::new();
        labels.hash(&mut hasher);
        let hash = hasher.finish();
        let bucket = self.by_hash.entry(hash).or_default();
        if let Some(found) = bucket
            .iter()
            .filter_map(Weak::upgrade)
            .find(|found| **found == *labels)
        {
            return found;
        }
        let new = Arc::new(labels.clone());
        bucket.push(Arc::downgrade(&new));
        self.entries += 1;
        if self.entries >= self.sweep_at {
            self.sweep();
        }
        new
    }

    /// Drops the entries of maps no pod holds any more; the next sweep waits until the table
    /// has doubled, so sweeping costs O(1) per label set on average.
    fn sweep(&mut self) {
        self.by_hash.retain(|_, bucket| {
            bucket.retain(|weak| weak.strong_count() > 0);
            !bucket.is_empty()
        });
        self.entries = self.by_hash.values().map(Vec::len).sum();
        self.sweep_at = (self.entries * 2).max(64);
    }
}

static TABLE: LazyLock<Mutex<Table>> = LazyLock::new(Mutex::default);

/// `labels` as a map shared with every other pod whose labels are equal.
pub fn shared(labels: Option<&Map>) -> Labels {
    match labels {
        None => Labels::default(),
        Some(labels) if labels.is_empty() => Labels::default(),
        Some(labels) => TABLE
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .shared(labels),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> Map {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn equal_labels_share_one_map_and_different_ones_do_not() {
        let mut table = Table::default();
        let a = table.shared(&map(&[("app", "web"), ("pod-template-hash", "1")]));
        let b = table.shared(&map(&[("app", "web"), ("pod-template-hash", "1")]));
        let c = table.shared(&map(&[("app", "db")]));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(*c, map(&[("app", "db")]));
    }

    #[test]
    fn maps_no_pod_holds_are_forgotten() {
        let mut table = Table::default();
        for i in 0..1000 {
            // Each dropped at once, as when a pod is gone.
            drop(table.shared(&map(&[("pod", &i.to_string())])));
        }
        assert!(table.entries <= 128, "{} entries kept", table.entries);
        let kept = table.shared(&map(&[("app", "web")]));
        assert!(Arc::ptr_eq(&kept, &table.shared(&map(&[("app", "web")]))));
    }
}
