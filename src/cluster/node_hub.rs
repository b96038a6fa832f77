//! One watch of every Node, shared by every node actor and by the cluster maintenance budget.
//!
//! A watch per maintained node (`fieldSelector=metadata.name=<node>`) costs a WATCH per
//! maintenance (and a LIST where the API server serves no streaming lists), and keeps a
//! stream open per maintenance with its buffers in kube's line framing and in hyper: about
//! 7 MiB at 500 maintenances. One watch of every Node costs one WATCH for the life of the
//! process, however many nodes are in maintenance, and what it keeps is small: each Node is
//! decoded slim ([`SlimNode`]: no status but the `Ready` condition, no images) and kept as the
//! [`NodeState`] the node actors read, under 1 KiB for a node with twenty labels. The watch
//! starts with the first subscription (a replica that maintains nothing watches nothing) and
//! stops when the cluster adapter is dropped.
//!
//! Followers of one node see its state once the watch has listed every node, then every change;
//! `None` while the node does not exist. A follower only ever wants the latest state, so
//! changes it has not read yet are replaced by newer ones. The budget's followers get every
//! node as a [`NodeSummary`]: all of them after each (re)list, then each change.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use futures::stream::{BoxStream, StreamExt};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use nmo_actors::model::{NodeState, NodeSummary, NodeSummaryEvent};
use tokio::sync::{mpsc, watch as latest};
use tokio::task::JoinHandle;

use super::slim_node::{self, PAGE_SIZE, SlimNode};
use super::watch::{self, InitialLists};
use super::watch_health::WatchHealth;

/// What nmo keeps of one node.
#[derive(Debug, Clone)]
struct KeptNode {
    state: NodeState,
    summary: NodeSummary,
}

impl KeptNode {
    fn of(node: &SlimNode) -> Self {
        KeptNode {
            state: slim_node::node_state(node),
            summary: slim_node::summary(node),
        }
    }
}

/// A node's state for its followers: `None` until the watch has listed, then the node or
/// `None` for one that does not exist.
type Known = Option<Option<NodeState>>;

/// The nodes the watch delivered and who follows them.
#[derive(Debug, Default)]
struct Nodes {
    /// Every node, once listed.
    current: BTreeMap<String, KeptNode>,
    /// A (re)list in progress: it replaces `current` once complete.
    listing: Option<BTreeMap<String, KeptNode>>,
    listed: bool,
    /// The followers of single nodes, by node name.
    followers: HashMap<String, latest::Sender<Known>>,
    /// The followers of every node's summary.
    summaries: Vec<mpsc::UnboundedSender<NodeSummaryEvent>>,
}

impl Nodes {
    /// Applies one event of the watch and tells the followers what changed.
    fn apply(&mut self, event: Event<SlimNode>) {
        match event {
            Event::Init => self.listing = Some(BTreeMap::new()),
            Event::InitApply(node) => {
                self.listing
                    .get_or_insert_default()
                    .insert(node.name_any(), KeptNode::of(&node));
            }
            Event::InitDone => {
                self.current = self.listing.take().unwrap_or_default();
                self.listed = true;
                self.followers
                    .retain(|_, follower| follower.receiver_count() > 0);
                for (name, follower) in &self.followers {
                    tell(follower, self.current.get(name).map(|n| n.state.clone()));
                }
                if !self.summaries.is_empty() {
                    let listed: Vec<NodeSummary> =
                        self.current.values().map(|n| n.summary.clone()).collect();
                    self.tell_summaries(|| NodeSummaryEvent::Listed(listed.clone()));
                }
            }
            Event::Apply(node) => {
                let name = node.name_any();
                let kept = KeptNode::of(&node);
                self.tell_follower(&name, Some(kept.state.clone()));
                self.tell_summaries(|| NodeSummaryEvent::Changed(kept.summary.clone()));
                self.current.insert(name, kept);
            }
            Event::Delete(node) => {
                let name = node.name_any();
                self.current.remove(&name);
                self.tell_follower(&name, None);
                self.tell_summaries(|| NodeSummaryEvent::Deleted(name.clone()));
            }
        }
    }

    fn tell_follower(&mut self, name: &str, node: Option<NodeState>) {
        if let Some(follower) = self.followers.get(name) {
            if follower.receiver_count() == 0 {
                self.followers.remove(name);
            } else {
                tell(follower, node);
            }
        }
    }

    fn tell_summaries(&mut self, event: impl Fn() -> NodeSummaryEvent) {
        self.summaries
            .retain(|follower| follower.send(event()).is_ok());
    }

    /// What a new follower of `name` sees first.
    fn known(&self, name: &str) -> Known {
        self.listed
            .then(|| self.current.get(name).map(|n| n.state.clone()))
    }

    fn follow(&mut self, name: &str) -> latest::Receiver<Known> {
        if let Some(follower) = self.followers.get(name) {
            return follower.subscribe();
        }
        let (follower, receiver) = latest::channel(self.known(name));
        self.followers.insert(name.to_string(), follower);
        receiver
    }

    fn follow_summaries(&mut self) -> mpsc::UnboundedReceiver<NodeSummaryEvent> {
        let (follower, receiver) = mpsc::unbounded_channel();
        if self.listed {
            let listed = self.current.values().map(|n| n.summary.clone()).collect();
            // The receiver is right here: this send cannot fail.
            let _ = follower.send(NodeSummaryEvent::Listed(listed));
        }
        self.summaries.push(follower);
        receiver
    }
}

/// Sends `node` to a follower unless it has it already (a relist repeats unchanged nodes).
fn tell(follower: &latest::Sender<Known>, node: Option<NodeState>) {
    follower.send_if_modified(|known| {
        let fresh = Some(node);
        if *known == fresh {
            return false;
        }
        *known = fresh;
        true
    });
}

/// The shared watch of every Node (see the module docs).
#[derive(Debug)]
pub struct NodeHub {
    api: Api<SlimNode>,
    lists: InitialLists,
    health: WatchHealth,
    nodes: Arc<Mutex<Nodes>>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl NodeHub {
    /// A hub over `client`'s Nodes, its watch reported to `health`; it watches nothing until
    /// followed.
    pub fn new(client: Client, lists: InitialLists, health: WatchHealth) -> Self {
        NodeHub {
            api: Api::all(client),
            lists,
            health,
            nodes: Arc::default(),
            task: Mutex::new(None),
        }
    }

    /// One node: its state once every node is listed, then after each change (`None` while it
    /// does not exist). The stream does not end while the hub lives.
    pub fn follow(&self, name: &str) -> BoxStream<'static, Option<NodeState>> {
        let mut receiver = self.lock().follow(name);
        self.start();
        async_stream::stream! {
            loop {
                let known = receiver.borrow_and_update().clone();
                if let Some(node) = known {
                    yield node;
                }
                if receiver.changed().await.is_err() {
                    return;
                }
            }
        }
        .boxed()
    }

    /// Every node as summaries: `Listed` after each (re)list, then the changes.
    pub fn summaries(&self) -> BoxStream<'static, NodeSummaryEvent> {
        let mut receiver = self.lock().follow_summaries();
        self.start();
        async_stream::stream! {
            while let Some(event) = receiver.recv().await {
                yield event;
            }
        }
        .boxed()
    }

    fn lock(&self) -> MutexGuard<'_, Nodes> {
        lock(&self.nodes)
    }

    /// Starts the watch unless it runs.
    fn start(&self) {
        let mut task = self.task.lock().unwrap_or_else(PoisonError::into_inner);
        if task.as_ref().is_some_and(|running| !running.is_finished()) {
            return;
        }
        let config = watcher::Config::default().page_size(PAGE_SIZE);
        let mut events = watch::events(
            self.api.clone(),
            config,
            self.lists.clone(),
            self.health.register("Nodes"),
        );
        let nodes: Weak<Mutex<Nodes>> = Arc::downgrade(&self.nodes);
        *task = Some(tokio::spawn(async move {
            while let Some(event) = events.next().await {
                let Some(nodes) = nodes.upgrade() else {
                    return;
                };
                lock(&nodes).apply(event);
            }
        }));
    }
}

impl Drop for NodeHub {
    fn drop(&mut self) {
        let task = self.task.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(task) = task.take() {
            task.abort();
        }
    }
}

/// Locks the nodes; a panic while they were locked leaves them as consistent as any event
/// left them, so the lock is taken anyway.
fn lock(nodes: &Mutex<Nodes>) -> MutexGuard<'_, Nodes> {
    nodes.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, version: &str, ready: bool) -> SlimNode {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "resourceVersion": version},
            "spec": {"unschedulable": false},
            "status": {"conditions": [
                {"type": "Ready", "status": if ready { "True" } else { "False" }}
            ]}
        }))
        .expect("a node")
    }

    fn listed(nodes: &mut Nodes, names: &[&str]) {
        nodes.apply(Event::Init);
        for name in names {
            nodes.apply(Event::InitApply(node(name, "1", true)));
        }
        nodes.apply(Event::InitDone);
    }

    fn version(known: &Known) -> Option<Option<String>> {
        known
            .as_ref()
            .map(|node| node.as_ref().map(|n| n.resource_version.clone()))
    }

    #[test]
    fn a_follower_learns_nothing_before_the_list_then_its_node_and_its_changes_only() {
        let mut nodes = Nodes::default();
        let mut follower = nodes.follow("n1");
        assert_eq!(version(&follower.borrow_and_update()), None);

        listed(&mut nodes, &["n1", "n2"]);
        assert!(follower.has_changed().expect("open"));
        assert_eq!(
            version(&follower.borrow_and_update()),
            Some(Some("1".into()))
        );

        nodes.apply(Event::Apply(node("n2", "2", true)));
        assert!(
            !follower.has_changed().expect("open"),
            "another node's change"
        );
        nodes.apply(Event::Apply(node("n1", "3", true)));
        assert_eq!(
            version(&follower.borrow_and_update()),
            Some(Some("3".into()))
        );
        nodes.apply(Event::Delete(node("n1", "4", true)));
        assert_eq!(version(&follower.borrow_and_update()), Some(None));
    }

    #[test]
    fn a_relist_tells_a_follower_only_what_changed() {
        let mut nodes = Nodes::default();
        listed(&mut nodes, &["n1", "n2"]);
        let mut follower = nodes.follow("n1");
        assert_eq!(
            version(&follower.borrow_and_update()),
            Some(Some("1".into())),
            "a follower after the list starts from the node as listed"
        );
        listed(&mut nodes, &["n1"]);
        assert!(!follower.has_changed().expect("open"), "n1 is as it was");
        listed(&mut nodes, &["n2"]);
        assert_eq!(
            version(&follower.borrow_and_update()),
            Some(None),
            "a node missing from the relist is gone"
        );
    }

    #[test]
    fn a_follower_that_left_is_forgotten() {
        let mut nodes = Nodes::default();
        listed(&mut nodes, &["n1"]);
        drop(nodes.follow("n1"));
        nodes.apply(Event::Apply(node("n1", "2", true)));
        assert!(nodes.followers.is_empty());
    }

    #[test]
    fn summaries_start_with_every_node_then_follow_the_changes() {
        let mut nodes = Nodes::default();
        let mut early = nodes.follow_summaries();
        listed(&mut nodes, &["n1", "n2"]);
        let mut late = nodes.follow_summaries();
        nodes.apply(Event::Apply(node("n2", "2", false)));
        nodes.apply(Event::Delete(node("n1", "3", true)));
        for follower in [&mut early, &mut late] {
            let Ok(NodeSummaryEvent::Listed(all)) = follower.try_recv() else {
                panic!("the list first");
            };
            let names: Vec<&str> = all.iter().map(|n| n.name.as_str()).collect();
            assert_eq!(names, ["n1", "n2"]);
            assert_eq!(
                follower.try_recv().ok(),
                Some(NodeSummaryEvent::Changed(NodeSummary {
                    name: "n2".into(),
                    ready: false,
                    unschedulable: false
                }))
            );
            assert_eq!(
                follower.try_recv().ok(),
                Some(NodeSummaryEvent::Deleted("n1".into()))
            );
            assert!(follower.try_recv().is_err());
        }
    }
}
