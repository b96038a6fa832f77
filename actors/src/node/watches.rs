//! The node actor's two watches: its Node (drift) and its node's pods (the drain). Each runs
//! in a task that turns stream items into messages; a stream that ends is re-subscribed later
//! by the actor.

use futures::StreamExt;
use futures::stream::BoxStream;
use ractor::ActorRef;
use tokio::task::JoinHandle;

use super::messages::{NodeMsg, WatchKind};
use crate::ports::Cluster;
use crate::task::TaskSlot;

/// The watch tasks of one node actor.
#[derive(Debug, Default)]
pub(super) struct Watches {
    node: TaskSlot,
    pods: TaskSlot,
}

/// Forwards every item of `stream` as `to_msg` makes it, then says the watch ended.
fn forward<T: Send + 'static>(
    mut stream: BoxStream<'static, T>,
    actor: &ActorRef<NodeMsg>,
    to_msg: fn(T) -> NodeMsg,
    kind: WatchKind,
) -> JoinHandle<()> {
    let actor = actor.clone();
    tokio::spawn(async move {
        while let Some(item) = stream.next().await {
            if actor.cast(to_msg(item)).is_err() {
                return;
            }
        }
        let _ = actor.cast(NodeMsg::WatchEnded(kind));
    })
}

impl Watches {
    /// Watches the Node, unless watched.
    pub(super) fn watch_node(
        &mut self,
        cluster: &dyn Cluster,
        node: &str,
        actor: &ActorRef<NodeMsg>,
    ) {
        if !self.node.is_set() {
            let stream = cluster.watch_node(node);
            self.node.set(forward(
                stream,
                actor,
                NodeMsg::NodeChanged,
                WatchKind::Node,
            ));
        }
    }

    /// Watches the node's pods, unless watched.
    pub(super) fn watch_pods(
        &mut self,
        cluster: &dyn Cluster,
        node: &str,
        actor: &ActorRef<NodeMsg>,
    ) {
        if !self.pods.is_set() {
            let stream = cluster.watch_pods(node);
            self.pods.set(forward(
                stream,
                actor,
                NodeMsg::PodsChanged,
                WatchKind::Pods,
            ));
        }
    }

    /// True while the pod watch runs (its first snapshot may still be on the way).
    pub(super) fn watching_pods(&self) -> bool {
        self.pods.is_set()
    }

    /// A watch's stream ended by itself.
    pub(super) fn ended(&mut self, kind: WatchKind) {
        match kind {
            WatchKind::Node => self.node.finished(),
            WatchKind::Pods => self.pods.finished(),
        }
    }

    /// Stops the Node watch.
    pub(super) fn stop_node(&mut self) {
        self.node.clear();
    }

    /// Stops the pod watch.
    pub(super) fn stop_pods(&mut self) {
        self.pods.clear();
    }
}
