//! One watch of the node leases' namespace, shared by every node actor: each follows its own
//! node's lease, so that another holder taking it (Node Health Check, an admin forcing a
//! takeover) stops the drain at once instead of at the next renewal, up to 20 minutes later.
//!
//! Why one watch of the namespace, and not one per lease or a read before each eviction: the
//! namespace holds the node leases of the medik8s operators, one per node in maintenance or
//! remediation at most, so listing it is small; one WATCH for the life of the process costs the
//! API server one watcher however many nodes are in maintenance (a watch per maintenance would
//! cost 500 watchers at 500 maintenances, and a GET per drain pass thousands of requests a
//! minute); and its events are only the leases' own writes (nmo renews each of its leases every
//! 20 minutes). The watch starts with the first follower and stops when the cluster adapter is
//! dropped.

use std::sync::{Arc, Mutex};

use futures::stream::BoxStream;
use k8s_openapi::api::coordination::v1::Lease as KubeLease;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use nmo_actors::model::Lease;

use super::convert;
use super::followed::{self, Followed, WatchTask, lock};
use super::watch::{self, InitialLists};
use super::watch_health::WatchHealth;

/// The leases the watch delivered and who follows them.
type Leases = Followed<Lease>;

fn apply(leases: &mut Leases, event: Event<KubeLease>) {
    leases.apply(event, |lease| lease.name_any(), convert::lease);
}

/// The shared watch of one namespace's leases (see the module docs).
#[derive(Debug)]
pub struct LeaseHub {
    api: Api<KubeLease>,
    namespace: String,
    lists: InitialLists,
    health: WatchHealth,
    leases: Arc<Mutex<Leases>>,
    task: WatchTask,
}

impl LeaseHub {
    /// A hub over the leases of `namespace`, its watch reported to `health`; it watches
    /// nothing until followed.
    pub fn new(client: Client, namespace: &str, lists: InitialLists, health: WatchHealth) -> Self {
        LeaseHub {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            lists,
            health,
            leases: Arc::default(),
            task: WatchTask::default(),
        }
    }

    /// One lease: its state once the namespace is listed, then after each change (`None`
    /// while it does not exist). The stream does not end while the hub lives.
    pub fn follow(&self, name: &str) -> BoxStream<'static, Option<Lease>> {
        let receiver = lock(&self.leases).follow(name);
        self.task.start(
            &self.leases,
            || {
                watch::events(
                    self.api.clone(),
                    watcher::Config::default(),
                    self.lists.clone(),
                    self.health
                        .register(format!("Leases in {}", self.namespace)),
                )
            },
            apply,
        );
        followed::stream(receiver, std::convert::identity)
    }
}
