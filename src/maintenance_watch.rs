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
) -> WatchError {
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
                upsert(&supervisor, &object)
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
                    .try_for_each(|(name, uid)| deleted(&supervisor, name, uid))
                    // Only now does the budget know every maintenance holding a slot, and may
                    // the orphan sweep look for nodes of NodeMaintenances that are gone.
                    .and_then(|()| listed(&supervisor))
            }
            Event::Apply(object) => {
                known.insert(object.name_any(), uid(&object));
                upsert(&supervisor, &object)
            }
            Event::Delete(object) => {
                let name = object.name_any();
                known.remove(&name);
                deleted(&supervisor, name, uid(&object))
            }
        };
        if let Err(error) = sent {
            return error;
        }
    }
    WatchError::WatchEnded
}

fn upsert(
    supervisor: &ActorRef<SupervisorMsg>,
    object: &NodeMaintenance,
) -> Result<(), WatchError> {
    supervisor
        .cast(SupervisorMsg::Upsert(Box::new(maintenance(object))))
        .map_err(|e| WatchError::SupervisorGone(e.to_string()))
}

fn listed(supervisor: &ActorRef<SupervisorMsg>) -> Result<(), WatchError> {
    supervisor
        .cast(SupervisorMsg::Listed)
        .map_err(|e| WatchError::SupervisorGone(e.to_string()))
}

fn uid(object: &NodeMaintenance) -> String {
    object.metadata.uid.clone().unwrap_or_default()
}

fn deleted(
    supervisor: &ActorRef<SupervisorMsg>,
    name: String,
    uid: String,
) -> Result<(), WatchError> {
    supervisor
        .cast(SupervisorMsg::Deleted { name, uid })
        .map_err(|e| WatchError::SupervisorGone(e.to_string()))
}
