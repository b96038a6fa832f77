//! The object store: serialized objects, one global resourceVersion counter, per-resource event
//! history for watches, and the indexes that keep per-node pod lists and watches cheap.
//!
//! Objects are kept as serialized JSON (`Bytes`) plus the few parsed bits that selectors and
//! indexes need: a GET or LIST copies bytes instead of re-serializing, and memory stays close to
//! the JSON size (a parsed `serde_json::Value` is several times larger).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::errors::ApiError;
use crate::object::{Key, StoredObject};
use crate::resources::ResourceDef;
use crate::selectors::{FieldTarget, Filter};

/// Stands for the resourceVersion while an object is serialized outside the store lock.
const RV_PLACEHOLDER: &str = "@@sim-rv@@";

/// Watch event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// ADDED.
    Added,
    /// MODIFIED.
    Modified,
    /// DELETED.
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as kept in the history and sent to watchers and controllers.
#[derive(Debug)]
pub struct StoreEvent {
    /// The resource.
    pub def: Arc<ResourceDef>,
    /// What happened.
    pub kind: EventType,
    /// The object after the change (for DELETED: its last state, with the deletion's RV).
    pub obj: Arc<StoredObject>,
    /// The object before the change.
    pub prev: Option<Arc<StoredObject>>,
}

impl StoreEvent {
    /// The event's resourceVersion.
    pub fn rv(&self) -> u64 {
        self.obj.rv
    }
}

/// What a watcher registers on, so that an event reaches only the watchers that may want it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// Every event of the resource.
    All,
    /// Events whose indexed field (pods: spec.nodeName) had or has this value.
    Index(String),
    /// Events of objects with this name.
    Name(String),
    /// Events in this namespace.
    Namespace(String),
}

impl Trigger {
    /// The cheapest trigger for a filter.
    pub fn for_filter(def: &ResourceDef, filter: &Filter) -> Trigger {
        if let Some(i) = def.indexed_field
            && let Some(v) = filter.fields.equality(&FieldTarget::Field(i))
        {
            return Trigger::Index(v.to_string());
        }
        if let Some(n) = filter.fields.equality(&FieldTarget::Name) {
            return Trigger::Name(n.to_string());
        }
        if let Some(ns) = &filter.namespace {
            return Trigger::Namespace(ns.clone());
        }
        Trigger::All
    }
}

struct WatcherEntry {
    id: u64,
    tx: mpsc::Sender<Arc<StoreEvent>>,
}

#[derive(Default)]
struct Table {
    objects: BTreeMap<Key, Arc<StoredObject>>,
    index: HashMap<String, BTreeSet<Key>>,
    history: VecDeque<Arc<StoreEvent>>,
    /// Events with an RV above this are all still in `history`.
    compacted: u64,
    watchers: HashMap<Trigger, Vec<WatcherEntry>>,
}

#[derive(Default)]
struct Inner {
    rv: u64,
    /// Watches from a resourceVersion below this end with 410 Expired, in every resource (a
    /// restart's fresh watch cache, see [`Store::expire_watch_history`]).
    expired_below: u64,
    tables: HashMap<String, Table>,
    /// owner uid -> dependents: (resource key, object key) -> the object as stored now (so a
    /// controller reads its 3,000 pods without 3,000 lookups).
    dependents: HashMap<String, HashMap<(String, Key), Arc<StoredObject>>>,
    /// uid -> (resource key, object key), for garbage collection.
    uids: HashMap<String, (String, Key)>,
}

/// The outcome of a failed commit.
#[derive(Debug)]
pub enum CommitError {
    /// The object exists (expected absent).
    Exists,
    /// The object does not exist.
    Missing,
    /// The object's RV is not the expected one.
    Stale,
    /// Another failure.
    Api(ApiError),
}

/// What a commit expects of the current object.
#[derive(Debug, Clone, Copy)]
pub enum Expect {
    /// It does not exist.
    Absent,
    /// It exists with this RV.
    Rv(u64),
}

/// A write.
#[derive(Debug)]
pub enum Write {
    /// Store this object.
    Put(Value),
    /// Remove the object; the value is its last state (sent in the DELETED event).
    Delete(Value),
}

impl Write {
    /// The object stored, or its last state.
    pub fn value(&self) -> &Value {
        match self {
            Write::Put(v) | Write::Delete(v) => v,
        }
    }
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy)]
pub enum WatchFrom {
    /// Synthetic ADDED events for the current state, then changes.
    Current,
    /// Replay the history after this RV, then changes.
    Rv(u64),
}

/// A registered watch.
pub struct WatchStart {
    /// Events to send first.
    pub initial: Vec<Arc<StoreEvent>>,
    /// Live events.
    pub rx: mpsc::Receiver<Arc<StoreEvent>>,
    /// Unregisters the watcher when dropped.
    pub guard: WatchGuard,
    /// The store's RV when the watch was registered.
    pub rv: u64,
}

/// Unregisters a watcher on drop.
pub struct WatchGuard {
    store: Arc<Store>,
    key: String,
    trigger: Trigger,
    id: u64,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.store.unwatch(&self.key, &self.trigger, self.id);
    }
}

/// The store.
pub struct Store {
    inner: Mutex<Inner>,
    current_rv: AtomicU64,
    next_id: AtomicU64,
    internal: broadcast::Sender<Arc<StoreEvent>>,
    history_limit: usize,
}

impl Store {
    /// An empty store keeping `history_limit` events per resource for watches.
    pub fn new(history_limit: usize) -> Arc<Self> {
        let (internal, _) = broadcast::channel(16384);
        Arc::new(Store {
            inner: Mutex::new(Inner::default()),
            current_rv: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
            internal,
            history_limit: history_limit.max(1),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent data (every mutation is completed
        // before anything that can panic), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The latest resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.current_rv.load(Ordering::SeqCst)
    }

    /// Subscribes to every change (for the in-process controllers).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<StoreEvent>> {
        self.internal.subscribe()
    }

    /// One object.
    pub fn get(&self, def: &ResourceDef, ns: &str, name: &str) -> Option<Arc<StoredObject>> {
        let inner = self.lock();
        inner
            .tables
            .get(&def.key())?
            .objects
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    /// Whether an object with this uid exists (any resource).
    pub fn uid_exists(&self, uid: &str) -> bool {
        self.lock().uids.contains_key(uid)
    }

    /// The dependents (by owner reference) of a uid: (resource key, object key).
    pub fn dependents(&self, uid: &str) -> Vec<(String, Key)> {
        self.lock()
            .dependents
            .get(uid)
            .map(|s| s.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether any object has `uid` as an owner.
    pub fn has_dependents(&self, uid: &str) -> bool {
        self.lock().dependents.contains_key(uid)
    }

    /// The objects of resource `def` in namespace `ns` that have `uid` as an owner, read under
    /// one lock (a ReplicaSet of 3,000 pods is synced on every change of one of them).
    pub fn dependents_of(&self, def: &ResourceDef, ns: &str, uid: &str) -> Vec<Arc<StoredObject>> {
        let inner = self.lock();
        let def_key = def.key();
        let Some(dependents) = inner.dependents.get(uid) else {
            return Vec::new();
        };
        dependents
            .iter()
            .filter(|((resource, key), _)| *resource == def_key && key.0 == ns)
            .map(|(_, object)| Arc::clone(object))
            .collect()
    }

    /// The resource key and object key of a uid.
    pub fn lookup_uid(&self, uid: &str) -> Option<(String, Key)> {
        self.lock().uids.get(uid).cloned()
    }

    /// Number of objects whose indexed field has this value (pods on a node).
    pub fn index_len(&self, def: &ResourceDef, value: &str) -> usize {
        self.lock()
            .tables
            .get(&def.key())
            .and_then(|t| t.index.get(value))
            .map_or(0, |s| s.len())
    }

    /// (objects, bytes of JSON) over all resources.
    pub fn stats(&self) -> (usize, usize) {
        let inner = self.lock();
        inner.tables.values().fold((0, 0), |(n, b), t| {
            (
                n + t.objects.len(),
                b + t.objects.values().map(|o| o.json.len()).sum::<usize>(),
            )
        })
    }

    /// (events, bytes of JSON they reference) kept in the watch histories.
    pub fn history_stats(&self) -> (usize, usize) {
        let inner = self.lock();
        inner.tables.values().fold((0, 0), |(n, b), t| {
            (
                n + t.history.len(),
                b + t
                    .history
                    .iter()
                    .map(|e| e.obj.json.len() + e.prev.as_ref().map_or(0, |p| p.json.len()))
                    .sum::<usize>(),
            )
        })
    }

    /// Forgets every resource's watch history, as a restarted kube-apiserver's fresh watch
    /// cache does: the resourceVersion moves on by one, and a watch resumed from any version
    /// before it ends with 410 Expired ("too old resource version"), so that its client lists
    /// again. Lists and watches from the new version are served as ever.
    pub fn expire_watch_history(&self) {
        let mut inner = self.lock();
        inner.rv += 1;
        let rv = inner.rv;
        inner.expired_below = rv;
        for table in inner.tables.values_mut() {
            table.history.clear();
            table.compacted = rv;
        }
        self.current_rv.store(rv, Ordering::SeqCst);
    }

    /// The resourceVersion up to which a resource's watch history was dropped.
    pub fn compacted(&self, def: &ResourceDef) -> u64 {
        self.lock()
            .tables
            .get(&def.key())
            .map_or(0, |t| t.compacted)
    }

    /// Sizes of every index bucket (pods per node).
    pub fn index_sizes(&self, def: &ResourceDef) -> HashMap<String, usize> {
        self.lock()
            .tables
            .get(&def.key())
            .map(|t| t.index.iter().map(|(k, v)| (k.clone(), v.len())).collect())
            .unwrap_or_default()
    }

    /// Number of objects of a resource.
    pub fn count(&self, def: &ResourceDef) -> usize {
        self.lock()
            .tables
            .get(&def.key())
            .map(|t| t.objects.len())
            .unwrap_or(0)
    }

    /// Lists matching objects in key order, starting after `after`, at most `limit` (0: all).
    /// Returns the items, the RV of the snapshot and whether more items remain.
    pub fn list(
        &self,
        def: &ResourceDef,
        filter: &Filter,
        after: Option<&Key>,
        limit: usize,
    ) -> (Vec<Arc<StoredObject>>, u64, bool) {
        let inner = self.lock();
        let rv = inner.rv;
        let Some(table) = inner.tables.get(&def.key()) else {
            return (Vec::new(), rv, false);
        };
        let mut out = Vec::new();
        let mut more = false;
        for o in table.candidates(def, filter, after) {
            if !filter.matches(o) {
                continue;
            }
            if limit > 0 && out.len() == limit {
                more = true;
                break;
            }
            out.push(o.clone());
        }
        (out, rv, more)
    }

    /// Commits a write if the current object is as expected. Assigns the new resourceVersion
    /// (written into `metadata.resourceVersion`), records the event, notifies watchers.
    pub fn commit(
        &self,
        def: &Arc<ResourceDef>,
        ns: &str,
        name: &str,
        expect: Expect,
        write: Write,
    ) -> Result<Arc<StoredObject>, CommitError> {
        let key: Key = (ns.to_string(), name.to_string());
        let tkey = def.key();
        let (value, deleting) = match write {
            Write::Put(v) => (v, false),
            Write::Delete(v) => (v, true),
        };
        let (mut fresh, at) = serialize_outside_lock(def, value)?;
        let mut inner = self.lock();
        let current = inner
            .tables
            .get(&tkey)
            .and_then(|t| t.objects.get(&key))
            .cloned();
        match (expect, &current) {
            (Expect::Absent, Some(_)) => return Err(CommitError::Exists),
            (Expect::Rv(_), None) => return Err(CommitError::Missing),
            (Expect::Rv(rv), Some(c)) if c.rv != rv => return Err(CommitError::Stale),
            _ => {}
        }
        let rv = inner.rv + 1;
        splice_rv(&mut fresh, at, rv);
        let stored = Arc::new(fresh);
        inner.rv = rv;
        let inner = &mut *inner;
        inner.reindex(&tkey, &key, current.as_deref(), &stored, deleting);
        let table = inner.tables.entry(tkey).or_default();
        if let Some(i) = def.indexed_field {
            table.reindex(i, &key, current.as_deref(), &stored, deleting);
        }
        let kind = table.write(key, &stored, deleting, current.is_some());
        let ev = Arc::new(StoreEvent {
            def: def.clone(),
            kind,
            obj: stored.clone(),
            prev: current,
        });
        table.remember(ev.clone(), self.history_limit);
        dispatch(table, def, &ev);
        // Published while still holding the lock so that anyone who reads `current_rv` and then
        // drains their channel has seen every event up to that RV.
        self.current_rv.store(rv, Ordering::SeqCst);
        let _ = self.internal.send(ev);
        Ok(stored)
    }

    /// Registers a watcher and returns what it must send first.
    pub fn watch(
        self: &Arc<Self>,
        def: &ResourceDef,
        filter: &Filter,
        from: WatchFrom,
        capacity: usize,
        def_arc: &Arc<ResourceDef>,
    ) -> Result<WatchStart, ApiError> {
        let trigger = Trigger::for_filter(def, filter);
        let tkey = def.key();
        let (tx, rx) = mpsc::channel(capacity.max(16));
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let mut inner = self.lock();
        let rv = inner.rv;
        let expired_below = inner.expired_below;
        let table = inner.tables.entry(tkey.clone()).or_default();
        let initial = match from {
            WatchFrom::Current => table.current_as_added(def_arc, filter, &trigger),
            WatchFrom::Rv(from_rv) => table.events_since(from_rv, expired_below)?,
        };
        table
            .watchers
            .entry(trigger.clone())
            .or_default()
            .push(WatcherEntry { id, tx });
        drop(inner);
        Ok(WatchStart {
            initial,
            rx,
            guard: WatchGuard {
                store: self.clone(),
                key: tkey,
                trigger,
                id,
            },
            rv,
        })
    }

    fn unwatch(&self, tkey: &str, trigger: &Trigger, id: u64) {
        let mut inner = self.lock();
        if let Some(t) = inner.tables.get_mut(tkey)
            && let Some(list) = t.watchers.get_mut(trigger)
        {
            list.retain(|w| w.id != id);
            if list.is_empty() {
                t.watchers.remove(trigger);
            }
        }
    }

    /// Number of registered watchers (all resources).
    pub fn watcher_count(&self) -> usize {
        self.lock()
            .tables
            .values()
            .map(|t| t.watchers.values().map(|v| v.len()).sum::<usize>())
            .sum()
    }

    /// Drops all objects of a resource (CRD deletion), emitting DELETED events.
    pub fn drop_resource(&self, def: &Arc<ResourceDef>) {
        let (items, _, _) = self.list(def, &Filter::default(), None, 0);
        for o in items {
            if let Ok(v) = o.value() {
                let _ = self.commit(
                    def,
                    &o.namespace,
                    &o.name,
                    Expect::Rv(o.rv),
                    Write::Delete(v),
                );
            }
        }
    }
}

/// Serializes an object to commit with a placeholder resourceVersion, and where the real one
/// goes: writers then serialize in parallel, outside the lock, and the lock stays short.
fn serialize_outside_lock(
    def: &ResourceDef,
    mut value: Value,
) -> Result<(StoredObject, Option<usize>), CommitError> {
    if let Some(m) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        m.insert("resourceVersion".into(), json!(RV_PLACEHOLDER));
    }
    let fresh = StoredObject::from_value(def, &value).map_err(CommitError::Api)?;
    let needle = format!("\"resourceVersion\":\"{RV_PLACEHOLDER}\"");
    let at = fresh
        .json
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
        .map(|p| p + needle.len() - RV_PLACEHOLDER.len() - 1);
    Ok((fresh, at))
}

/// Splices resourceVersion `rv` in where [`serialize_outside_lock`] left its placeholder.
fn splice_rv(fresh: &mut StoredObject, at: Option<usize>, rv: u64) {
    if let Some(at) = at {
        let rvs = rv.to_string();
        let mut out = Vec::with_capacity(fresh.json.len() + rvs.len());
        out.extend_from_slice(&fresh.json[..at]);
        out.extend_from_slice(rvs.as_bytes());
        out.extend_from_slice(&fresh.json[at + RV_PLACEHOLDER.len()..]);
        fresh.json = Bytes::from(out);
    }
    fresh.rv = rv;
}

impl Inner {
    /// The owner and uid indexes after a commit of object `key` of resource `tkey`.
    fn reindex(
        &mut self,
        tkey: &str,
        key: &Key,
        current: Option<&StoredObject>,
        stored: &Arc<StoredObject>,
        deleting: bool,
    ) {
        let entry = (tkey.to_string(), key.clone());
        if let Some(c) = current {
            for o in &c.owner_uids {
                if let Some(set) = self.dependents.get_mut(o) {
                    set.remove(&entry);
                    if set.is_empty() {
                        self.dependents.remove(o);
                    }
                }
            }
            self.uids.remove(&c.uid);
        }
        if !deleting {
            for o in &stored.owner_uids {
                self.dependents
                    .entry(o.clone())
                    .or_default()
                    .insert(entry.clone(), Arc::clone(stored));
            }
            self.uids.insert(stored.uid.clone(), entry);
        }
    }
}

impl Table {
    /// The index of field `i` after a commit of object `key`.
    fn reindex(
        &mut self,
        i: usize,
        key: &Key,
        current: Option<&StoredObject>,
        stored: &StoredObject,
        deleting: bool,
    ) {
        if let Some(c) = current
            && let Some(v) = c.fields.get(i)
            && let Some(set) = self.index.get_mut(v)
        {
            set.remove(key);
            if set.is_empty() {
                self.index.remove(v);
            }
        }
        if !deleting && let Some(v) = stored.fields.get(i) {
            self.index.entry(v.clone()).or_default().insert(key.clone());
        }
    }

    /// Stores or removes object `key`; what the watchers see of it.
    fn write(
        &mut self,
        key: Key,
        stored: &Arc<StoredObject>,
        deleting: bool,
        existed: bool,
    ) -> EventType {
        if deleting {
            self.objects.remove(&key);
            EventType::Deleted
        } else {
            self.objects.insert(key, stored.clone());
            if existed {
                EventType::Modified
            } else {
                EventType::Added
            }
        }
    }

    /// The objects after `after` in key order that may match `filter`: those of its indexed
    /// field value or namespace, if it names one, else all.
    fn candidates<'a>(
        &'a self,
        def: &ResourceDef,
        filter: &Filter,
        after: Option<&'a Key>,
    ) -> Box<dyn Iterator<Item = &'a Arc<StoredObject>> + 'a> {
        let beyond = move |k: &Key| after.is_none_or(|l| k > l);
        match Trigger::for_filter(def, filter) {
            Trigger::Index(v) => Box::new(
                self.index
                    .get(&v)
                    .into_iter()
                    .flatten()
                    .filter(move |k| beyond(k))
                    .filter_map(|k| self.objects.get(k)),
            ),
            Trigger::Namespace(ns) => {
                let start = match after {
                    Some(l) if l.0 == ns => l.clone(),
                    _ => (ns.clone(), String::new()),
                };
                Box::new(
                    self.objects
                        .range(start..)
                        .take_while(move |(k, _)| k.0 == ns)
                        .filter(move |(k, _)| beyond(k))
                        .map(|(_, o)| o),
                )
            }
            _ => match after {
                Some(l) => Box::new(
                    self.objects
                        .range((
                            std::ops::Bound::Excluded(l.clone()),
                            std::ops::Bound::Unbounded,
                        ))
                        .map(|(_, o)| o),
                ),
                None => Box::new(self.objects.values()),
            },
        }
    }

    /// Synthetic ADDED events for the objects that match `filter` now (a watch from the
    /// current state).
    fn current_as_added(
        &self,
        def: &Arc<ResourceDef>,
        filter: &Filter,
        trigger: &Trigger,
    ) -> Vec<Arc<StoreEvent>> {
        let objs: Vec<Arc<StoredObject>> = match trigger {
            Trigger::Index(v) => self
                .index
                .get(v)
                .map(|keys| {
                    keys.iter()
                        .filter_map(|k| self.objects.get(k).cloned())
                        .collect()
                })
                .unwrap_or_default(),
            _ => self
                .objects
                .values()
                .filter(|o| filter.matches(o))
                .cloned()
                .collect(),
        };
        objs.into_iter()
            .filter(|o| filter.matches(o))
            .map(|o| {
                Arc::new(StoreEvent {
                    def: def.clone(),
                    kind: EventType::Added,
                    obj: o,
                    prev: None,
                })
            })
            .collect()
    }

    /// The events after `from_rv` (a watch from a resourceVersion); 410 Expired when some of
    /// them are no longer in the history.
    fn events_since(
        &self,
        from_rv: u64,
        expired_below: u64,
    ) -> Result<Vec<Arc<StoreEvent>>, ApiError> {
        let compacted = self.compacted.max(expired_below);
        if from_rv < compacted {
            return Err(ApiError::expired(format!(
                "too old resource version: {from_rv} ({})",
                compacted + 1
            )));
        }
        Ok(self
            .history
            .iter()
            .filter(|e| e.rv() > from_rv)
            .cloned()
            .collect())
    }

    /// Keeps `ev` in the history (the oldest compacted beyond `limit` events).
    fn remember(&mut self, ev: Arc<StoreEvent>, limit: usize) {
        self.history.push_back(ev);
        while self.history.len() > limit {
            if let Some(old) = self.history.pop_front() {
                self.compacted = old.rv();
            }
        }
    }
}

/// Sends an event to the watchers registered on the triggers it may concern. A watcher whose
/// channel is full is dropped (its stream ends and the client re-watches), as the real server
/// does with slow watchers.
fn dispatch(table: &mut Table, def: &ResourceDef, ev: &Arc<StoreEvent>) {
    if table.watchers.is_empty() {
        return;
    }
    let mut triggers = vec![Trigger::All];
    if let Some(i) = def.indexed_field {
        if let Some(v) = ev.obj.fields.get(i) {
            triggers.push(Trigger::Index(v.clone()));
        }
        if let Some(p) = &ev.prev
            && let Some(v) = p.fields.get(i)
            && Some(v) != ev.obj.fields.get(i)
        {
            triggers.push(Trigger::Index(v.clone()));
        }
    }
    triggers.push(Trigger::Name(ev.obj.name.clone()));
    if !ev.obj.namespace.is_empty() {
        triggers.push(Trigger::Namespace(ev.obj.namespace.clone()));
    }
    for t in triggers {
        if let Some(list) = table.watchers.get_mut(&t) {
            list.retain(|w| w.tx.try_send(ev.clone()).is_ok());
            if list.is_empty() {
                table.watchers.remove(&t);
            }
        }
    }
}
