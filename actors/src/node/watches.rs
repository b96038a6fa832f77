//! The node actor's watches: its Node (drift), its node's pods (the drain) and its node lease
//! (another holder taking it). Each runs in a task that turns stream items into messages; a
//! stream that ends is re-subscribed later by the actor.
//!
//! What the watches deliver is also kept where the operations can read it, so that they need
//! not ask the API for what a watch already has: the Node as last seen (the reconcile patches
//! from it instead of a GET) and the first pod list of the pod watch (the first counts come
//! from it instead of a LIST). The first pod list is dropped once the counts are taken: its pods'
//! first versions would otherwise live as long as the drain, long after the pods are gone.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use futures::stream::BoxStream;
use ractor::ActorRef;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::messages::{NodeMsg, WatchKind};
use super::seen::{Seen, SeenNode};
use crate::model::{NodeName, NodeState, PodList};
use crate::ports::Cluster;
use crate::task::TaskSlot;

/// The watch tasks of one node actor, and what they delivered.
#[derive(Debug)]
pub(super) struct Watches {
    node: TaskSlot,
    pods: TaskSlot,
    lease: TaskSlot,
    /// The node's KubeVirt VMIs, while launcher pods are drained.
    vms: TaskSlot,
    /// The Node as last delivered, kept after its watch stops (the undo starts from it).
    node_seen: watch::Sender<Option<Option<NodeState>>>,
    /// The first pod list of the pod watch running now, until the first counts took it.
    first_pods: watch::Sender<Option<PodList>>,
    /// The first counts were taken while the pod watch ran: no first list is kept again, also
    /// after the watch ended and was subscribed again (until it is stopped).
    first_pods_counted: Arc<AtomicBool>,
    /// The pod list as last delivered while no drain ran (a drain that starts after the watch
    /// did begins with it).
    pods_seen: Option<PodList>,
}

impl Default for Watches {
    fn default() -> Self {
        Watches {
            node: TaskSlot::default(),
            pods: TaskSlot::default(),
            lease: TaskSlot::default(),
            vms: TaskSlot::default(),
            node_seen: watch::Sender::new(None),
            first_pods: watch::Sender::new(None),
            first_pods_counted: Arc::default(),
            pods_seen: None,
        }
    }
}

/// Forwards every item of `stream` as `to_msg` makes it, handing a copy to `keep` too when
/// `wanted` says it keeps it (after the message is queued: whoever reads what `keep` kept acts
/// after the actor saw it), then says the watch ended. Only wanted items are copied: a pod list
/// is copied once per pod watch, not once per change.
fn forward<T: Clone + Send + 'static>(
    mut stream: BoxStream<'static, T>,
    actor: &ActorRef<NodeMsg>,
    to_msg: fn(T) -> NodeMsg,
    kind: WatchKind,
    wanted: impl Fn() -> bool + Send + 'static,
    mut keep: impl FnMut(T) + Send + 'static,
) -> JoinHandle<()> {
    let actor = actor.clone();
    tokio::spawn(async move {
        while let Some(item) = stream.next().await {
            let kept = wanted().then(|| item.clone());
            if actor.cast(to_msg(item)).is_err() {
                return;
            }
            if let Some(kept) = kept {
                keep(kept);
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
        node: &NodeName,
        actor: &ActorRef<NodeMsg>,
    ) {
        if !self.node.is_set() {
            let stream = cluster.watch_node(node);
            let seen = self.node_seen.clone();
            self.node.set(forward(
                stream,
                actor,
                NodeMsg::NodeChanged,
                WatchKind::Node,
                || true,
                move |node| {
                    seen.send_replace(Some(node));
                },
            ));
        }
    }

    /// Watches the node's pods, unless watched.
    pub(super) fn watch_pods(
        &mut self,
        cluster: &dyn Cluster,
        node: &NodeName,
        actor: &ActorRef<NodeMsg>,
    ) {
        if !self.pods.is_set() {
            self.first_pods.send_replace(None);
            self.pods_seen = None;
            let stream = cluster.watch_pods(node);
            let first = self.first_pods.clone();
            let unset = self.first_pods.clone();
            let (counted, kept_counted) = (
                self.first_pods_counted.clone(),
                self.first_pods_counted.clone(),
            );
            self.pods.set(forward(
                stream,
                actor,
                NodeMsg::PodsChanged,
                WatchKind::Pods,
                move || !counted.load(Ordering::Acquire) && unset.borrow().is_none(),
                move |pods| {
                    if !kept_counted.load(Ordering::Acquire) && first.borrow().is_none() {
                        first.send_replace(Some(pods));
                    }
                },
            ));
        }
    }

    /// Watches the node lease `name` in `namespace`, unless watched.
    pub(super) fn watch_lease(
        &mut self,
        cluster: &dyn Cluster,
        namespace: &str,
        name: &str,
        actor: &ActorRef<NodeMsg>,
    ) {
        if !self.lease.is_set() {
            let stream = cluster.watch_lease(namespace, name);
            self.lease.set(forward(
                stream,
                actor,
                NodeMsg::LeaseChanged,
                WatchKind::Lease,
                || false,
                |_| {},
            ));
        }
    }

    /// Watches the node's KubeVirt VMIs, unless watched (nothing is delivered where KubeVirt is
    /// not installed).
    pub(super) fn watch_vms(
        &mut self,
        cluster: &dyn Cluster,
        node: &NodeName,
        actor: &ActorRef<NodeMsg>,
    ) {
        if !self.vms.is_set() {
            let stream = cluster.watch_vms(node);
            self.vms.set(forward(
                stream,
                actor,
                NodeMsg::VmsChanged,
                WatchKind::Vms,
                || false,
                |_| {},
            ));
        }
    }

    /// Stops the VMI watch.
    pub(super) fn stop_vms(&mut self) {
        self.vms.clear();
    }

    /// The Node as its watch delivers it.
    pub(super) fn seen_node(&self) -> SeenNode {
        self.node_seen.subscribe()
    }

    /// The Node as last delivered, if ever.
    pub(super) fn last_node(&self) -> Option<Option<NodeState>> {
        self.node_seen.borrow().clone()
    }

    /// The first pod list of the running pod watch, for the first counts; None once they were
    /// taken from it (counting again lists the pods).
    pub(super) fn first_pods(&self) -> Option<Seen<PodList>> {
        (!self.first_pods_counted.load(Ordering::Acquire)).then(|| self.first_pods.subscribe())
    }

    /// The first counts were taken: the first pod list is dropped, and none is kept again until
    /// the pod watch is stopped.
    pub(super) fn first_pods_counted(&mut self) {
        self.first_pods_counted.store(true, Ordering::Release);
        self.first_pods.send_replace(None);
    }

    /// Keeps the pod list the running pod watch delivered while no drain takes it.
    pub(super) fn keep_pods(&mut self, pods: PodList) {
        if self.pods.is_set() {
            self.pods_seen = Some(pods);
        }
    }

    /// The pod list the running pod watch last delivered, for a drain that starts now.
    pub(super) fn take_pods(&mut self) -> Option<PodList> {
        self.pods_seen.take()
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
            WatchKind::Lease => self.lease.finished(),
            WatchKind::Vms => self.vms.finished(),
        }
    }

    /// Stops the lease watch.
    pub(super) fn stop_lease(&mut self) {
        self.lease.clear();
    }

    /// Stops the Node watch (what it delivered stays).
    pub(super) fn stop_node(&mut self) {
        self.node.clear();
    }

    /// Stops the pod watch.
    pub(super) fn stop_pods(&mut self) {
        self.pods.clear();
        self.pods_seen = None;
        self.first_pods.send_replace(None);
        self.first_pods_counted = Arc::default();
    }
}
