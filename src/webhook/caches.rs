//! What the webhook answers CREATE reviews from: every NodeMaintenance, and every Node's
//! metadata (name and labels, which say whether it is a control-plane node), each kept by one
//! watch for the life of the webhook. A review then costs the API server nothing, however many
//! reviews a client forges; without them each CREATE was a GET of its node and an unpaginated
//! LIST of every NodeMaintenance.
//!
//! The caches lag the cluster by a watch event: two NodeMaintenances for one node created
//! within that moment can both be admitted, as with the Go operator (controller-runtime's
//! webhook reads its manager's cache too). The supervisor marks the second one Failed, naming
//! the first, and it never touches the node. Until a cache has listed, reviews are denied with
//! "try again".

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::rules::has_control_plane_label;
use crate::crd::NodeMaintenance;

/// The webhook's watches and what they keep; cheap to clone.
#[derive(Clone)]
pub struct Caches {
    maintenances: Store<NodeMaintenance>,
    nodes: Store<PartialObjectMeta<Node>>,
    _watches: Arc<Watches>,
}

/// The watch tasks, stopped when the last clone of the caches is dropped.
struct Watches(Vec<JoinHandle<()>>);

impl Drop for Watches {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

impl Caches {
    /// Starts both watches (retrying with backoff when they fail).
    pub fn start(client: &Client) -> Self {
        let (maintenances, maintenance_writer) = reflector::store();
        let maintenance_events = watcher(
            Api::<NodeMaintenance>::all(client.clone()),
            watcher::Config::default(),
        )
        .default_backoff()
        .modify(|nm| nm.meta_mut().managed_fields = None);
        let (nodes, node_writer) = reflector::store();
        // Metadata only: kube asks for PartialObjectMetadata of an `Api<PartialObjectMeta<_>>`.
        let node_events = watcher(
            Api::<PartialObjectMeta<Node>>::all(client.clone()),
            watcher::Config::default(),
        )
        .default_backoff()
        .modify(|node: &mut PartialObjectMeta<Node>| node.metadata.managed_fields = None);
        let watches = vec![
            tokio::spawn(drive(reflector::reflector(
                maintenance_writer,
                maintenance_events,
            ))),
            tokio::spawn(drive(reflector::reflector(node_writer, node_events))),
        ];
        Caches {
            maintenances,
            nodes,
            _watches: Arc::new(Watches(watches)),
        }
    }

    /// Waits until both watches have listed, at most until `deadline`; whether they have.
    pub async fn ready_by(&self, deadline: Instant) -> bool {
        let both = async {
            self.maintenances.wait_until_ready().await.is_ok()
                && self.nodes.wait_until_ready().await.is_ok()
        };
        tokio::time::timeout_at(deadline, both)
            .await
            .unwrap_or(false)
    }

    /// The node named `name` (its metadata only), if it exists.
    pub fn node(&self, name: &str) -> Option<Node> {
        self.nodes
            .get(&reflector::ObjectRef::new(name))
            .map(|meta| Node {
                metadata: meta.metadata.clone(),
                ..Node::default()
            })
    }

    /// Every NodeMaintenance.
    pub fn maintenances(&self) -> Vec<NodeMaintenance> {
        self.maintenances
            .state()
            .iter()
            .map(|nm| NodeMaintenance::clone(nm))
            .collect()
    }

    /// The names of the nodes carrying either control-plane role label.
    pub fn control_plane_node_names(&self) -> BTreeSet<String> {
        self.nodes
            .state()
            .iter()
            .filter(|node| has_control_plane_label(&node.metadata))
            .filter_map(|node| node.metadata.name.clone())
            .collect()
    }
}

/// Runs a reflector's stream for ever (its errors are retried by the watcher's backoff).
async fn drive<S, T, E>(stream: S)
where
    S: futures::Stream<Item = Result<T, E>> + Send,
    E: std::fmt::Display,
{
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        if let Err(error) = event {
            tracing::debug!(%error, "webhook cache watch failed; retrying with backoff");
        }
    }
}
