//! The NodeMaintenance watch, feeding the supervisor: every NodeMaintenance the watch sees is sent as `Upsert`, every one
//! that disappears as `Deleted`, and after every (re)listing a `Sweep` for nodes left changed
//! by NodeMaintenances that no longer exist. The supervisor and its node actors do the rest.

use std::collections::BTreeMap;

use futures::StreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use nmo_actors::SupervisorMsg;
use ractor::ActorRef;

use crate::cluster::maintenance;
use crate::cluster::watch::{InitialLists, events};
use crate::cluster::watch_health::WatchHealth;
use crate::crd::NodeMaintenance;
use crate::observability::controller_metrics::{ControllerMetrics, WATCH_QUEUE};
use crate::observability::health::Readiness;

/// Why the NodeMaintenance watch stopped feeding the supervisor.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The supervisor is gone, so nothing can act on what the watch sees.
    #[error("the supervisor stopped: {0}")]
    SupervisorGone(String),
    /// The watch stream ended, which `cluster::watch::events` never does.
    #[error("the NodeMaintenance watch ended")]
    WatchEnded,
}

/// Watches NodeMaintenances until the supervisor is gone; tells `readiness` once the first
/// listing is in. The watch is reported to `health` with the others; its failures are retried
/// (and logged) by `cluster::watch::events`, and after each it lists again: what was created
/// or deleted meanwhile reaches the supervisor then.
///
/// The first list comes as a streaming list where the API server serves them (`lists`), and
/// this watch starts before any maintenance does: a server that refuses streaming lists has
/// done so before any node's watch asks, and none of them wastes a request on it.
pub async fn run(
    client: Client,
    lists: InitialLists,
    health: WatchHealth,
    supervisor: ActorRef<SupervisorMsg>,
    readiness: Readiness,
    queue: ControllerMetrics,
) -> WatchError {
    // Every message to the supervisor is counted as added to its work queue.
    let supervisor = Supervisor {
        actor: supervisor,
        queue,
    };
    let api: Api<NodeMaintenance> = Api::all(client);
    let mut stream = events(
        api,
        watcher::Config::default(),
        lists,
        health.register("NodeMaintenances"),
    );
    // Names (and uids) the supervisor was told about; a relist that misses one means it was
    // deleted while the watch was down.
    let mut known: BTreeMap<String, String> = BTreeMap::new();
    let mut relisted: BTreeMap<String, String> = BTreeMap::new();
    while let Some(event) = stream.next().await {
        let sent = match event {
            Event::Init => {
                relisted.clear();
                Ok(())
            }
            Event::InitApply(object) => {
                relisted.insert(object.name_any(), uid(&object));
                supervisor.upsert(&object)
            }
            Event::InitDone => {
                // Gone: not relisted, or relisted under another uid (deleted and created again).
                let gone: Vec<(String, String)> = known
                    .iter()
                    .filter(|(name, uid)| relisted.get(*name) != Some(*uid))
                    .map(|(name, uid)| (name.clone(), uid.clone()))
                    .collect();
                known = std::mem::take(&mut relisted);
                readiness.listed();
                gone.into_iter()
                    .try_for_each(|(name, uid)| supervisor.deleted(name, uid))
                    // Only now does the budget know every maintenance holding a slot, and may
                    // the orphan sweep look for nodes of NodeMaintenances that are gone.
                    .and_then(|()| supervisor.listed())
            }
            Event::Apply(object) => {
                known.insert(object.name_any(), uid(&object));
                supervisor.upsert(&object)
            }
            Event::Delete(object) => {
                let name = object.name_any();
                known.remove(&name);
                supervisor.deleted(name, uid(&object))
            }
        };
        if let Err(error) = sent {
            return error;
        }
    }
    WatchError::WatchEnded
}

/// The supervisor, as the watch feeds it.
struct Supervisor {
    actor: ActorRef<SupervisorMsg>,
    queue: ControllerMetrics,
}

impl Supervisor {
    fn send(&self, message: SupervisorMsg) -> Result<(), WatchError> {
        // Counted first: the supervisor may handle it (and count it out) before `cast` returns.
        self.queue.added(WATCH_QUEUE);
        self.actor
            .cast(message)
            .map_err(|e| WatchError::SupervisorGone(e.to_string()))
    }

    fn upsert(&self, object: &NodeMaintenance) -> Result<(), WatchError> {
        self.send(SupervisorMsg::Upsert(Box::new(maintenance(object))))
    }

    fn listed(&self) -> Result<(), WatchError> {
        self.send(SupervisorMsg::Listed)
    }

    fn deleted(&self, name: String, uid: String) -> Result<(), WatchError> {
        self.send(SupervisorMsg::Deleted {
            name: name.into(),
            uid: uid.into(),
        })
    }
}

fn uid(object: &NodeMaintenance) -> String {
    object.metadata.uid.clone().unwrap_or_default()
}
