//! Watches as streams of complete snapshots: what the node actor wants to know is "what is on
//! my node now", not the individual events.
//!
//! A watch starts with the objects as they are. kube-runtime gets them with a LIST and then
//! WATCHes from its resourceVersion: two requests per watch, two watches per maintenance. An
//! API server with streaming lists (the `WatchList` feature, on by default since Kubernetes
//! 1.32's beta) sends them as the first events of the WATCH itself: one request. nmo asks for
//! that, and an API server that refuses it (an older one, or one with the feature off, answers
//! 400 or 422) is asked the old way from then on, by every watch of the process.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::stream::{BoxStream, StreamExt};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;

/// How watches get their initial objects: learned once, shared by every watch of a client.
#[derive(Debug, Clone, Default)]
pub struct InitialLists {
    /// The API server refused a streaming list: LIST, then WATCH.
    list_then_watch: Arc<AtomicBool>,
}

impl InitialLists {
    /// Whether watches still ask for streaming lists.
    pub fn streaming(&self) -> bool {
        !self.list_then_watch.load(Ordering::Relaxed)
    }

    /// The API server refused a streaming list: every watch lists first from now on.
    fn fall_back(&self) {
        if !self.list_then_watch.swap(true, Ordering::Relaxed) {
            tracing::info!(
                "the API server does not serve streaming lists (WatchList); watches list first"
            );
        }
    }
}

/// Whether a watch event is the API server refusing a streaming list: the WATCH that asks for
/// one is rejected as a bad request (400, or 422 for invalid list options).
fn refuses_streaming<K>(event: &Result<Event<K>, watcher::Error>) -> bool {
    matches!(
        event,
        Err(watcher::Error::WatchStartFailed(kube::Error::Api(status)))
            if status.code == 400 || status.code == 422
    )
}

/// The watch events of `config`, from a streaming list while the API server serves them.
fn events<K>(
    api: Api<K>,
    config: watcher::Config,
    lists: InitialLists,
) -> BoxStream<'static, Result<Event<K>, watcher::Error>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    async_stream::stream! {
        loop {
            let streaming = lists.streaming();
            let config = if streaming {
                config.clone().streaming_lists()
            } else {
                config.clone()
            };
            let mut watching = watch(api.clone(), config).default_backoff().boxed();
            let mut refused = false;
            while let Some(event) = watching.next().await {
                if streaming && refuses_streaming(&event) {
                    refused = true;
                    break;
                }
                yield event;
            }
            if !refused {
                return;
            }
            lists.fall_back();
        }
    }
    .boxed()
}

/// Every object matching `config`, as one list after the initial listing and after every
/// change. Watch errors are retried with kube-runtime's default backoff (and logged), so the
/// stream only ends when the caller drops it.
pub fn snapshots<K, T>(
    api: Api<K>,
    config: watcher::Config,
    lists: InitialLists,
    convert: fn(&K) -> T,
) -> BoxStream<'static, Vec<T>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    T: Clone + Send + 'static,
{
    let mut current: BTreeMap<(String, String), T> = BTreeMap::new();
    let mut listing: BTreeMap<(String, String), T> = BTreeMap::new();
    events(api, config, lists)
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
