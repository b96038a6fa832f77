//! Watches as streams of complete snapshots: what the node actor wants to know is "what is on
//! my node now", not the individual events.
//!
//! A watch starts with the objects as they are. A watch session (`watch_session`, nmo's
//! leaner stand-in for kube-runtime's watcher) gets them with a LIST and then WATCHes from its
//! resourceVersion: two requests per watch (a pod watch per maintenance, one
//! node watch shared by all, see `node_hub`). An
//! API server with streaming lists (the `WatchList` feature, on by default since Kubernetes
//! 1.32's beta) sends them as the first events of the WATCH itself: one request. nmo asks for
//! that, and an API server that refuses it is asked the old way from then on, by every watch of
//! the process. A refusal takes two forms: an older API server, or one with the feature off,
//! answers the WATCH with 400 or 422; one whose etcd cannot report watch progress (etcd before
//! 3.4.31 or 3.5.13: `RequestWatchProgress`) accepts the WATCH and then sends an ERROR event
//! (500) before the initial list ends. Like client-go's reflector, nmo takes any API error
//! before the initial list is complete as a refusal: falling back costs a LIST per watch,
//! retrying a streaming list the server will never serve would stall every maintenance.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;

use futures::stream::{BoxStream, StreamExt};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::watch_health::WatchReporter;
use super::watch_retry::WatchRetry;
use super::watch_session;

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

/// `config` for a watch of one node's objects (its pods, its VMs), whose LIST, where the API
/// server refuses streaming lists, asks for any resourceVersion (`0`) and is not paged, as
/// client-go's reflectors list: the API server answers it from its watch cache (for pods, by its
/// node index). A LIST of the latest version is a read of etcd, and an API server on an etcd
/// without streaming lists (before 3.4.31 / 3.5.13) serves none from its cache: each node's pod
/// LIST then reads every pod of the cluster, a cost that grows with nodes x pods. The cache is
/// behind etcd by moments at most, and the WATCH that follows from the list's version delivers
/// whatever it missed. (kube sends no resourceVersion `0` with a page size, and a node's objects
/// are few.) A streaming list ignores both settings.
///
/// Each WATCH asks the server to end it after [`PER_NODE_WATCH_TIMEOUT_SECS`] rather than kube's
/// 290 s, so that the watch of a drain of several minutes is one request, not one per five
/// minutes (0.3 more per node at 1,000 drains at once).
pub fn per_node(config: watcher::Config) -> watcher::Config {
    let mut config = config.any_semantic().timeout(PER_NODE_WATCH_TIMEOUT_SECS);
    config.page_size = None;
    config
}

/// How long the API server keeps a per-node WATCH open before ending it (the watcher then
/// watches again from where it was). A connection that dies silently is not what this bounds:
/// the client's HTTP/2 pings find it within `DEFAULT_KEEP_ALIVE_INTERVAL` +
/// `DEFAULT_KEEP_ALIVE_TIMEOUT` (45 s) and every watch on it fails at once; kube's own idle
/// limit on the stream is this plus 5 s. Ten minutes is client-go's longest (its reflectors
/// pick 5 to 10).
pub const PER_NODE_WATCH_TIMEOUT_SECS: u32 = 600;

/// Whether a watch failure is the API server refusing a streaming list, given whether the
/// initial list has been delivered: the WATCH that asks for one is rejected as a bad request
/// (400, or 422 for invalid list options), or, before the initial list is complete, the
/// stream carries an API error instead of it (the 500 of an API server on an etcd without
/// `RequestWatchProgress`). Transport errors are not refusals: they are retried as they are.
fn refuses_streaming(error: &watcher::Error, listed: bool) -> bool {
    match error {
        watcher::Error::WatchStartFailed(kube::Error::Api(status)) => {
            status.code == 400 || status.code == 422
        }
        watcher::Error::WatchError(_) => !listed,
        _ => false,
    }
}

/// The watch events of `config`, from a streaming list while the API server serves them,
/// reported to `health` (see `watch_health`).
///
/// The stream never ends and carries no errors: a watch that fails (connection lost or
/// reset, `410 Gone`, an error event, the server down for minutes) is dropped and started
/// afresh after [`WatchRetry`]'s wait, so its next events are a complete list (`Init`,
/// `InitApply`..., `InitDone`) that its reader takes in whole: whatever was missed meanwhile
/// (deletions included) is in what the reader sees next. Starting afresh rather than resuming
/// from the last resourceVersion costs a list per failure, and makes "established" something
/// the watch can tell: it is once the list is in.
pub fn events<K>(
    api: Api<K>,
    config: watcher::Config,
    lists: InitialLists,
    health: WatchReporter,
) -> BoxStream<'static, Event<K>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    async_stream::stream! {
        let mut retry = WatchRetry::default();
        loop {
            let streaming = lists.streaming();
            let config = if streaming {
                config.clone().streaming_lists()
            } else {
                config.clone()
            };
            health.listing();
            let mut watching = watch_session::session(api.clone(), config);
            // Whether this watch has delivered its initial list.
            let mut listed = false;
            let failure = loop {
                match watching.next().await {
                    Some(Ok(event)) => {
                        if matches!(event, Event::InitDone) {
                            listed = true;
                            retry.listed();
                            health.established();
                        }
                        yield event;
                    }
                    Some(Err(error)) => break Some(error),
                    // A session that ends without a failure (a streaming list cut short): start again.
                    None => break None,
                }
            };
            drop(watching);
            let Some(error) = failure else {
                continue;
            };
            if streaming && refuses_streaming(&error, listed) {
                lists.fall_back();
                continue;
            }
            let wait = retry.after(&error);
            health.failed(&error, wait);
            tokio::time::sleep(wait).await;
        }
    }
    .boxed()
}

/// Every object matching `config`, as one list after the initial listing and after every
/// change (see [`events`]: the stream never ends, and failures are retried there).
///
/// Every event ready at once is applied before one list is built: a burst (a drain's pods
/// evicted together) costs one list, and one message to its reader, not one per event; the
/// reader only ever wants the latest.
pub fn snapshots<K, T>(
    api: Api<K>,
    config: watcher::Config,
    lists: InitialLists,
    health: WatchReporter,
    convert: fn(&K) -> T,
) -> BoxStream<'static, Vec<T>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    T: Clone + Send + 'static,
{
    batched(events(api, config, lists, health), convert)
}

/// At most this many events go into one list: a flood of events still yields lists.
const BATCH: usize = 256;

/// The lists of `events` (see [`snapshots`]).
fn batched<K, T>(
    events: BoxStream<'static, Event<K>>,
    convert: fn(&K) -> T,
) -> BoxStream<'static, Vec<T>>
where
    K: Resource + Send + 'static,
    T: Clone + Send + 'static,
{
    let mut events = events.fuse();
    let mut objects = Objects::new(convert);
    let mut ended = false;
    futures::stream::poll_fn(move |cx| {
        if ended {
            return Poll::Ready(None);
        }
        let mut changed = false;
        let mut applied = 0;
        loop {
            if applied == BATCH {
                // More may be ready: come back for them after this list.
                cx.waker().wake_by_ref();
                break;
            }
            match events.poll_next_unpin(cx) {
                Poll::Ready(Some(event)) => {
                    changed |= objects.apply(event);
                    applied += 1;
                }
                Poll::Ready(None) => {
                    ended = true;
                    break;
                }
                Poll::Pending => break,
            }
        }
        match (changed, ended) {
            (true, _) => Poll::Ready(Some(objects.list())),
            (false, true) => Poll::Ready(None),
            (false, false) => Poll::Pending,
        }
    })
    .boxed()
}

/// The objects a watch has delivered, by namespace and name.
struct Objects<K, T> {
    current: BTreeMap<(String, String), T>,
    /// A listing in progress (it replaces `current` once complete).
    listing: BTreeMap<(String, String), T>,
    convert: fn(&K) -> T,
}

impl<K: Resource, T: Clone> Objects<K, T> {
    fn new(convert: fn(&K) -> T) -> Self {
        Objects {
            current: BTreeMap::new(),
            listing: BTreeMap::new(),
            convert,
        }
    }

    /// Applies one event; true when the objects changed.
    fn apply(&mut self, event: Event<K>) -> bool {
        let key = |object: &K| (object.namespace().unwrap_or_default(), object.name_any());
        match event {
            Event::Init => {
                self.listing.clear();
                false
            }
            Event::InitApply(object) => {
                self.listing.insert(key(&object), (self.convert)(&object));
                false
            }
            Event::InitDone => {
                self.current = std::mem::take(&mut self.listing);
                true
            }
            Event::Apply(object) => {
                self.current.insert(key(&object), (self.convert)(&object));
                true
            }
            Event::Delete(object) => {
                self.current.remove(&key(&object));
                true
            }
        }
    }

    fn list(&self) -> Vec<T> {
        self.current.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn object(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn name(object: &ConfigMap) -> String {
        object.name_any()
    }

    fn status(code: u16, reason: &str) -> kube::core::Status {
        kube::core::Status::failure("refused", reason).with_code(code)
    }

    #[test]
    fn a_per_node_watch_lists_from_the_cache_unpaged_and_lasts_ten_minutes() {
        let config = per_node(watcher::Config::default().fields("spec.nodeName=n1"));
        assert_eq!(config.field_selector.as_deref(), Some("spec.nodeName=n1"));
        assert_eq!(config.page_size, None);
        assert!(matches!(config.list_semantic, watcher::ListSemantic::Any));
        assert_eq!(config.timeout, Some(600));
        // kube's default, which a drain of more than five minutes would outlast.
        assert_eq!(watcher::Config::default().timeout, None);
    }

    #[test]
    fn an_error_event_before_the_initial_list_refuses_streaming_lists() {
        // What kube-apiserver on etcd 3.4.23 answers a streaming list with: the WATCH is
        // accepted, then an ERROR event (500 InternalError, RequestWatchProgress disabled).
        let error = watcher::Error::WatchError(Box::new(status(500, "InternalError")));
        assert!(refuses_streaming(&error, false));
        // Once the initial list arrived, an error event is the watch's own trouble.
        assert!(!refuses_streaming(&error, true));
    }

    #[test]
    fn a_rejected_watch_refuses_streaming_lists_and_a_broken_one_does_not() {
        let rejected = |code| {
            watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(status(code, "BadRequest"))))
        };
        assert!(refuses_streaming(&rejected(400), false));
        assert!(refuses_streaming(&rejected(422), true));
        assert!(!refuses_streaming(&rejected(503), false));
    }

    #[tokio::test]
    async fn events_ready_together_make_one_list() {
        let events = futures::stream::iter(vec![
            Event::Init,
            Event::InitApply(object("a")),
            Event::InitApply(object("b")),
            Event::InitDone,
            Event::Apply(object("c")),
            Event::Delete(object("a")),
        ])
        .boxed();
        let lists: Vec<Vec<String>> = batched(events, name).collect().await;
        assert_eq!(lists, vec![vec!["b".to_string(), "c".to_string()]]);
    }

    #[tokio::test]
    async fn events_apart_make_a_list_each() {
        let (sender, receiver) = futures::channel::mpsc::unbounded();
        let mut lists = batched(receiver.boxed(), name);
        sender.unbounded_send(Event::Init).unwrap();
        sender.unbounded_send(Event::InitDone).unwrap();
        assert_eq!(lists.next().await, Some(vec![]));
        sender.unbounded_send(Event::Apply(object("a"))).unwrap();
        assert_eq!(lists.next().await, Some(vec!["a".to_string()]));
        sender.unbounded_send(Event::Apply(object("b"))).unwrap();
        sender.unbounded_send(Event::Delete(object("a"))).unwrap();
        drop(sender);
        assert_eq!(lists.next().await, Some(vec!["b".to_string()]));
        assert_eq!(lists.next().await, None);
    }

    #[tokio::test]
    async fn a_flood_still_yields_lists() {
        let events = futures::stream::iter(
            (0..BATCH * 2 + 1).map(|i| Event::Apply(object(&format!("o{i:04}")))),
        )
        .boxed();
        let lists: Vec<Vec<String>> = batched(events, name).collect().await;
        assert_eq!(lists.len(), 3);
        assert_eq!(lists[2].len(), BATCH * 2 + 1);
    }
}
