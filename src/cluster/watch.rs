//! Watches as streams of complete snapshots: what the node actor wants to know is "what is on
//! my node now", not the individual events.

use std::collections::BTreeMap;
use std::fmt::Debug;

use futures::stream::{BoxStream, StreamExt};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;

/// Every object matching `config`, as one list after the initial listing and after every
/// change. Watch errors are retried with kube-runtime's default backoff (and logged), so the
/// stream only ends when the caller drops it.
pub fn snapshots<K, T>(
    api: Api<K>,
    config: watcher::Config,
    convert: fn(&K) -> T,
) -> BoxStream<'static, Vec<T>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    T: Clone + Send + 'static,
{
    let mut current: BTreeMap<(String, String), T> = BTreeMap::new();
    let mut listing: BTreeMap<(String, String), T> = BTreeMap::new();
    watch(api, config)
        .default_backoff()
        .filter_map(move |event| {
            let key = |object: &K| (object.namespace().unwrap_or_default(), object.name_any());
            let changed = match event {
                Ok(Event::Init) => {
                    listing.clear();
                    false
                }
                Ok(Event::InitApply(object)) => {
                    listing.insert(key(&object), convert(&object));
                    false
                }
                Ok(Event::InitDone) => {
                    current = std::mem::take(&mut listing);
                    true
                }
                Ok(Event::Apply(object)) => {
                    current.insert(key(&object), convert(&object));
                    true
                }
                Ok(Event::Delete(object)) => {
                    current.remove(&key(&object));
                    true
                }
                Err(error) => {
                    tracing::warn!(%error, "watch failed; retrying with backoff");
                    false
                }
            };
            let snapshot = changed.then(|| current.values().cloned().collect::<Vec<T>>());
            futures::future::ready(snapshot)
        })
        .boxed()
}
