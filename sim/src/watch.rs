//! WATCH streams: initial events (current state or history replay), live events filtered with
//! the real watch cache's semantics (an object that stops matching is sent as DELETED), bookmarks,
//! timeouts, `410 Expired` as an ERROR event, and injected early closes.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::errors::ApiError;
use crate::resources::ResourceDef;
use crate::selectors::Filter;
use crate::store::{EventType, Store, StoreEvent, WatchFrom};

/// What a watch request asked for.
#[derive(Debug, Clone)]
pub struct WatchParams {
    /// Where to start.
    pub from: WatchFrom,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// `sendInitialEvents` (ends the initial events with a bookmark).
    pub send_initial_events: bool,
    /// `timeoutSeconds` (or the server's default).
    pub timeout: Duration,
    /// Interval between bookmarks.
    pub bookmark_interval: Duration,
    /// Fault injection: close the stream after this long.
    pub close_after: Option<Duration>,
    /// Fault injection: close the stream after this many events.
    pub close_after_events: Option<usize>,
    /// Send each object as a one-row Table (`kubectl get -w`).
    pub table: Option<crate::table::Include>,
}

/// One watch event line.
fn line(kind: &str, obj: &[u8]) -> Bytes {
    let mut v = Vec::with_capacity(obj.len() + 32);
    v.extend_from_slice(b"{\"type\":\"");
    v.extend_from_slice(kind.as_bytes());
    v.extend_from_slice(b"\",\"object\":");
    v.extend_from_slice(obj);
    v.extend_from_slice(b"}\n");
    Bytes::from(v)
}

fn bookmark(def: &ResourceDef, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({"kind": def.kind, "apiVersion": def.api_version(), "metadata": meta});
    line("BOOKMARK", obj.to_string().as_bytes())
}

/// The ERROR event a watch ends with when it cannot be served (e.g. 410 Expired).
pub fn error_line(e: &ApiError) -> Bytes {
    line("ERROR", e.to_status().to_string().as_bytes())
}

impl WatchParams {
    /// The resourceVersion the watch has sent everything up to before its first event: the
    /// one it resumes from, or the store's at its start (`current`).
    fn sent_up_to(&self, current: u64) -> u64 {
        match self.from {
            WatchFrom::Rv(r) => r,
            WatchFrom::Current => current,
        }
    }

    /// When the watch ends: at its timeout, or earlier when a fault closes it.
    fn deadline(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
            + self
                .close_after
                .map_or(self.timeout, |c| c.min(self.timeout))
    }

    /// The bookmark ticks, the first one interval from now.
    fn bookmark_ticks(&self) -> tokio::time::Interval {
        tokio::time::interval_at(
            tokio::time::Instant::now() + self.bookmark_interval,
            self.bookmark_interval,
        )
    }
}

/// Converts a store event for a filtered watcher, as the watch cache does; as a one-row Table
/// when asked.
fn convert(
    def: &ResourceDef,
    ev: &StoreEvent,
    filter: &Filter,
    table: Option<crate::table::Include>,
) -> Option<Bytes> {
    let plain = convert_plain(def, ev, filter)?;
    let Some(include) = table else {
        return Some(plain);
    };
    let v: Value = serde_json::from_slice(&plain).ok()?;
    let kind = v.get("type")?.as_str()?.to_string();
    let obj = v.get("object")?;
    let t = crate::table::table_values(def, std::slice::from_ref(obj), ev.rv(), None, include);
    Some(line(&kind, t.to_string().as_bytes()))
}

fn convert_plain(def: &ResourceDef, ev: &StoreEvent, filter: &Filter) -> Option<Bytes> {
    let cur = filter.matches(&ev.obj);
    let body = || crate::convert::render(def, &ev.obj);
    match ev.kind {
        EventType::Added => cur.then(|| line("ADDED", &body())),
        EventType::Deleted => cur.then(|| line("DELETED", &body())),
        EventType::Modified => {
            let prev = ev.prev.as_ref().is_some_and(|p| filter.matches(p));
            match (prev, cur) {
                (true, true) => Some(line("MODIFIED", &body())),
                (false, true) => Some(line("ADDED", &body())),
                (true, false) => {
                    // The previous content, with the event's resourceVersion.
                    let p = ev.prev.as_ref()?;
                    let mut v: Value = serde_json::from_slice(&p.json).ok()?;
                    v["metadata"]["resourceVersion"] = json!(ev.rv().to_string());
                    let v = crate::convert::from_storage(def, &v);
                    Some(line("DELETED", v.to_string().as_bytes()))
                }
                (false, false) => None,
            }
        }
    }
}

/// The body stream of a watch response.
pub fn stream(
    store: Arc<Store>,
    def: Arc<ResourceDef>,
    filter: Filter,
    params: WatchParams,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    async_stream::stream! {
        let start = match store.watch(&def, &filter, params.from, 4096, &def) {
            Ok(s) => s,
            Err(e) => {
                yield Ok(error_line(&e));
                return;
            }
        };
        let mut rx = start.rx;
        let _guard = start.guard;
        let mut last_rv = params.sent_up_to(start.rv);
        let mut sent = 0usize;
        let limit = params.close_after_events.unwrap_or(usize::MAX);
        for ev in &start.initial {
            if let Some(b) = convert(&def, ev, &filter, params.table) {
                yield Ok(b);
                sent += 1;
                if sent >= limit {
                    return;
                }
            }
            last_rv = last_rv.max(ev.rv());
        }
        if params.send_initial_events && params.bookmarks {
            yield Ok(bookmark(&def, last_rv, true));
        }
        let deadline = params.deadline();
        let mut tick = params.bookmark_ticks();
        loop {
            let next = next_batch(&mut rx, &mut tick, params.bookmarks, deadline, &mut shutdown, &store);
            let Some((batch, mark)) = next.await else {
                return;
            };
            for ev in batch {
                if ev.rv() <= last_rv {
                    continue;
                }
                last_rv = ev.rv();
                if let Some(b) = convert(&def, &ev, &filter, params.table) {
                    yield Ok(b);
                    sent += 1;
                    if sent >= limit {
                        return;
                    }
                }
            }
            if let Some(current) = mark {
                last_rv = last_rv.max(current);
                yield Ok(bookmark(&def, last_rv, false));
            }
        }
    }
}

/// The next events for a watch and, on a bookmark tick, the resourceVersion a bookmark may
/// promise after them; None when the watch ends (its deadline, shutdown, or the store dropped
/// it).
async fn next_batch(
    rx: &mut tokio::sync::mpsc::Receiver<Arc<StoreEvent>>,
    tick: &mut tokio::time::Interval,
    bookmarks: bool,
    deadline: tokio::time::Instant,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
    store: &Store,
) -> Option<(Vec<Arc<StoreEvent>>, Option<u64>)> {
    enum Step {
        Event(Option<Arc<StoreEvent>>),
        Tick,
        Stop,
    }
    let step = tokio::select! {
        ev = rx.recv() => Step::Event(ev),
        _ = tick.tick(), if bookmarks => Step::Tick,
        _ = tokio::time::sleep_until(deadline) => Step::Stop,
        _ = shutdown.changed() => Step::Stop,
    };
    match step {
        Step::Stop | Step::Event(None) => None,
        Step::Event(Some(ev)) => Some((vec![ev], None)),
        Step::Tick => {
            // Everything up to `current` has already been queued to us: drain, then promise no
            // more than what was delivered.
            let current = store.current_rv();
            let mut batch = Vec::new();
            while let Ok(ev) = rx.try_recv() {
                batch.push(ev);
            }
            Some((batch, Some(current)))
        }
    }
}
