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

use std::sync::{Arc, Mutex, MutexGuard};

use futures::stream::{BoxStream, StreamExt};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use nmo_actors::model::{NodeState, NodeSummary, NodeSummaryEvent};
use tokio::sync::mpsc;

use super::followed::{self, Change, Followed, WatchTask, lock};

use super::slim_node::{self, PAGE_SIZE, SlimNode};
use super::watch::{self, InitialLists};
use super::watch_health::WatchHealth;

/// What nmo keeps of one node.
#[derive(Debug, Clone, PartialEq)]
struct KeptNode {
    state: NodeState,
    summary: NodeSummary,
}

impl KeptNode {
    /// Kept once, shared: the hub's map and the node's follower hold the same allocation
    /// (a node with its labels is a few KB, and a maintained node's was kept twice).
    fn of(node: &SlimNode) -> Arc<Self> {
        Arc::new(KeptNode {
            state: slim_node::node_state(node),
            summary: slim_node::summary(node),
        })
    }

    fn state(kept: Arc<Self>) -> NodeState {
        Arc::unwrap_or_clone(kept).state
    }
}

/// The nodes the watch delivered and who follows them.
#[derive(Debug, Default)]
struct Nodes {
    /// Every node, and the followers of single nodes.
    followed: Followed<Arc<KeptNode>>,
    /// The followers of every node's summary.
    summaries: Vec<mpsc::UnboundedSender<NodeSummaryEvent>>,
}

impl Nodes {
    /// Applies one event of the watch and tells the followers what changed.
    fn apply(&mut self, event: Event<SlimNode>) {
        match self
            .followed
            .apply(event, |node| node.name_any(), KeptNode::of)
        {
            Change::None => {}
            Change::Listed => {
                if !self.summaries.is_empty() {
                    let listed: Vec<NodeSummary> =
                        self.followed.values().map(|n| n.summary.clone()).collect();
                    self.tell_summaries(|| NodeSummaryEvent::Listed(listed.clone()));
                }
            }
            Change::Applied(_, kept) => {
                self.tell_summaries(|| NodeSummaryEvent::Changed(kept.summary.clone()));
            }
            Change::Deleted(name) => {
                self.tell_summaries(|| NodeSummaryEvent::Deleted(name.as_str().into()));
            }
        }
    }

    fn tell_summaries(&mut self, event: impl Fn() -> NodeSummaryEvent) {
        self.summaries
            .retain(|follower| follower.send(event()).is_ok());
    }

    fn follow_summaries(&mut self) -> mpsc::UnboundedReceiver<NodeSummaryEvent> {
        let (follower, receiver) = mpsc::unbounded_channel();
        if self.followed.listed() {
            let listed = self.followed.values().map(|n| n.summary.clone()).collect();
            // The receiver is right here: this send cannot fail.
            let _ = follower.send(NodeSummaryEvent::Listed(listed));
        }
        self.summaries.push(follower);
        receiver
    }
}

/// The shared watch of every Node (see the module docs).
#[derive(Debug)]
pub struct NodeHub {
    api: Api<SlimNode>,
    lists: InitialLists,
    health: WatchHealth,
    nodes: Arc<Mutex<Nodes>>,
    task: WatchTask,
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
            task: WatchTask::default(),
        }
    }

    /// One node: its state once every node is listed, then after each change (`None` while it
    /// does not exist). The stream does not end while the hub lives.
    pub fn follow(&self, name: &str) -> BoxStream<'static, Option<NodeState>> {
        let receiver = self.lock().followed.follow(name);
        self.start();
        followed::stream(receiver, KeptNode::state)
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
        self.task.start(
            &self.nodes,
            || {
                watch::events(
                    self.api.clone(),
                    watcher::Config::default().page_size(PAGE_SIZE),
                    self.lists.clone(),
                    self.health.register("Nodes"),
                )
            },
            Nodes::apply,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::followed::Known;
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

    fn version(known: &Known<Arc<KeptNode>>) -> Option<Option<String>> {
        known
            .as_ref()
            .map(|node| node.as_ref().map(|n| n.state.resource_version.clone()))
    }

    /// The hub and a node's follower share one copy of the node, listed or changed.
    #[test]
    fn a_followed_node_is_kept_once() {
        let mut nodes = Nodes::default();
        let follower = nodes.followed.follow("n1");
        listed(&mut nodes, &["n1"]);
        let same = |nodes: &Nodes| {
            let told = follower.borrow().clone().flatten().expect("n1 told");
            let kept = nodes.followed.values().next().expect("n1 kept").clone();
            Arc::ptr_eq(&told, &kept)
        };
        assert!(same(&nodes), "listed");
        nodes.apply(Event::Apply(node("n1", "2", true)));
        assert!(same(&nodes), "changed");
    }

    #[test]
    fn a_follower_learns_nothing_before_the_list_then_its_node_and_its_changes_only() {
        let mut nodes = Nodes::default();
        let mut follower = nodes.followed.follow("n1");
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
        let mut follower = nodes.followed.follow("n1");
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
        drop(nodes.followed.follow("n1"));
        nodes.apply(Event::Apply(node("n1", "2", true)));
        assert_eq!(nodes.followed.followers(), 0);
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
