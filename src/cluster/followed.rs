//! What a shared watch delivered, by name, and who follows which object: the part the shared
//! watches of Nodes (`node_hub`) and of node leases (`lease_hub`) have in common.
//!
//! Followers of one object see it once the watch has listed everything, then every change;
//! `None` while it does not exist. A follower only ever wants the latest state, so changes it
//! has not read yet are replaced by newer ones, and a relist that finds an object unchanged
//! tells nobody.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use futures::stream::{BoxStream, StreamExt};
use kube::runtime::watcher::Event;
use tokio::sync::watch as latest;
use tokio::task::JoinHandle;

/// An object's state for its followers: `None` until the watch has listed, then the object or
/// `None` for one that does not exist.
pub(crate) type Known<V> = Option<Option<V>>;

/// The objects a shared watch delivered (kept as `V`), and their followers.
#[derive(Debug)]
pub(crate) struct Followed<V> {
    /// Every object, once listed.
    current: BTreeMap<String, V>,
    /// A (re)list in progress: it replaces `current` once complete.
    listing: Option<BTreeMap<String, V>>,
    listed: bool,
    /// The followers of single objects, by name.
    followers: HashMap<String, latest::Sender<Known<V>>>,
}

impl<V> Default for Followed<V> {
    fn default() -> Self {
        Followed {
            current: BTreeMap::new(),
            listing: None,
            listed: false,
            followers: HashMap::new(),
        }
    }
}

/// What one event did to the objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change<V> {
    /// Nothing yet (a list in progress).
    None,
    /// A list is complete.
    Listed,
    /// One object was created or changed.
    Applied(String, V),
    /// One object is gone.
    Deleted(String),
}

impl<V: Clone + PartialEq> Followed<V> {
    /// Applies one event of the watch, keeping each object as `keep` makes it and naming it by
    /// `name`, and tells the followers what changed.
    pub(crate) fn apply<K>(
        &mut self,
        event: Event<K>,
        name: impl Fn(&K) -> String,
        keep: impl Fn(&K) -> V,
    ) -> Change<V> {
        match event {
            Event::Init => {
                self.listing = Some(BTreeMap::new());
                Change::None
            }
            Event::InitApply(object) => {
                self.listing
                    .get_or_insert_default()
                    .insert(name(&object), keep(&object));
                Change::None
            }
            Event::InitDone => {
                self.current = self.listing.take().unwrap_or_default();
                self.listed = true;
                self.followers
                    .retain(|_, follower| follower.receiver_count() > 0);
                for (name, follower) in &self.followers {
                    tell(follower, self.current.get(name).cloned());
                }
                Change::Listed
            }
            Event::Apply(object) => {
                let (name, kept) = (name(&object), keep(&object));
                self.tell_follower(&name, Some(kept.clone()));
                self.current.insert(name.clone(), kept.clone());
                Change::Applied(name, kept)
            }
            Event::Delete(object) => {
                let name = name(&object);
                self.current.remove(&name);
                self.tell_follower(&name, None);
                Change::Deleted(name)
            }
        }
    }

    fn tell_follower(&mut self, name: &str, object: Option<V>) {
        if let Some(follower) = self.followers.get(name) {
            if follower.receiver_count() == 0 {
                self.followers.remove(name);
            } else {
                tell(follower, object);
            }
        }
    }

    /// Whether the watch has listed everything once.
    pub(crate) fn listed(&self) -> bool {
        self.listed
    }

    /// Every object as last listed or changed.
    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.current.values()
    }

    /// Follows `name`: its state now (see [`Known`]), then each change.
    pub(crate) fn follow(&mut self, name: &str) -> latest::Receiver<Known<V>> {
        if let Some(follower) = self.followers.get(name) {
            return follower.subscribe();
        }
        let known = self.listed.then(|| self.current.get(name).cloned());
        let (follower, receiver) = latest::channel(known);
        self.followers.insert(name.to_string(), follower);
        receiver
    }

    #[cfg(test)]
    pub(crate) fn followers(&self) -> usize {
        self.followers.len()
    }
}

/// Sends `object` to a follower unless it has it already (a relist repeats unchanged objects).
fn tell<V: PartialEq>(follower: &latest::Sender<Known<V>>, object: Option<V>) {
    follower.send_if_modified(|known| {
        let fresh = Some(object);
        if *known == fresh {
            return false;
        }
        *known = fresh;
        true
    });
}

/// A follower's receiver as a stream of what it follows (`show` turns the kept value into what
/// the follower reads): nothing until the watch has listed, then the object (None while it
/// does not exist) and each change. Ends when the watch's objects are dropped.
pub(crate) fn stream<V, T>(
    mut receiver: latest::Receiver<Known<V>>,
    show: fn(V) -> T,
) -> BoxStream<'static, Option<T>>
where
    V: Clone + Send + Sync + 'static,
    T: Send + 'static,
{
    async_stream::stream! {
        loop {
            let known = receiver.borrow_and_update().clone();
            if let Some(object) = known {
                yield object.map(show);
            }
            if receiver.changed().await.is_err() {
                return;
            }
        }
    }
    .boxed()
}

/// The task of a shared watch: started by the first follower, aborted when dropped (with the
/// hub that owns it).
#[derive(Debug, Default)]
pub(crate) struct WatchTask(Mutex<Option<JoinHandle<()>>>);

impl WatchTask {
    /// Runs `events` into `objects` (each event handed to `apply`), unless already running.
    /// The task holds `objects` weakly: it ends once they are dropped.
    pub(crate) fn start<T, E>(
        &self,
        objects: &Arc<Mutex<T>>,
        events: impl FnOnce() -> BoxStream<'static, E>,
        apply: fn(&mut T, E),
    ) where
        T: Send + 'static,
        E: Send + 'static,
    {
        let mut task = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if task.as_ref().is_some_and(|running| !running.is_finished()) {
            return;
        }
        let objects: Weak<Mutex<T>> = Arc::downgrade(objects);
        *task = Some(tokio::spawn(run(events(), objects, apply)));
    }
}

async fn run<T, E>(mut events: BoxStream<'static, E>, objects: Weak<Mutex<T>>, apply: fn(&mut T, E))
where
    T: Send + 'static,
    E: Send + 'static,
{
    while let Some(event) = events.next().await {
        let Some(objects) = objects.upgrade() else {
            return;
        };
        apply(&mut lock(&objects), event);
    }
}

impl Drop for WatchTask {
    fn drop(&mut self) {
        let task = self.0.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(task) = task.take() {
            task.abort();
        }
    }
}

/// Locks a hub's objects; a panic while they were locked leaves them as consistent as any
/// event left them, so the lock is taken anyway.
pub(crate) fn lock<T>(objects: &Mutex<T>) -> MutexGuard<'_, T> {
    objects.lock().unwrap_or_else(PoisonError::into_inner)
}
