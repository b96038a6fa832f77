//! Creating and deleting NodeMaintenances through the API, many at once, as an administrator
//! (or a script putting a rack into maintenance) would.

use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};

use super::error::DemoError;
use super::tracker::Tracker;
use nmo::crd::{NodeMaintenance, NodeMaintenanceSpec};

/// Requests in flight at once while creating or deleting: "all at once" without opening one
/// connection per object.
const CONCURRENCY: usize = 64;

/// The NodeMaintenance name for a node.
pub fn name_for(node: &str) -> String {
    format!("nm-{node}")
}

/// Creates one NodeMaintenance per node, concurrently, recording each creation time in the
/// tracker just before its request leaves. Returns the names.
pub async fn create_all(
    client: &Client,
    tracker: &Tracker,
    nodes: &[String],
    reason: &str,
) -> Result<Vec<String>, DemoError> {
    let api: Api<NodeMaintenance> = Api::all(client.clone());
    let names: Vec<String> = nodes.iter().map(|n| name_for(n)).collect();
    futures::stream::iter(nodes.iter().zip(&names))
        .map(|(node, name)| {
            let api = api.clone();
            async move {
                let nm = NodeMaintenance::new(
                    name,
                    NodeMaintenanceSpec {
                        node_name: node.clone(),
                        reason: Some(reason.to_string()),
                        drain_timeout: None,
                        on_drain_timeout: None,
                    },
                );
                tracker.created(name, node, Instant::now());
                api.create(&PostParams::default(), &nm)
                    .await
                    .map(|_| ())
                    .map_err(|source| DemoError::Create {
                        name: name.clone(),
                        source,
                    })
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(names)
}

/// Deletes the named NodeMaintenances concurrently (already gone is fine).
pub async fn delete_all(client: &Client, names: &[String]) -> Result<(), DemoError> {
    let api: Api<NodeMaintenance> = Api::all(client.clone());
    futures::stream::iter(names)
        .map(|name| {
            let api = api.clone();
            async move {
                match api.delete(name, &DeleteParams::default()).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
                    Err(source) => Err(DemoError::Delete {
                        name: name.clone(),
                        source,
                    }),
                }
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}
