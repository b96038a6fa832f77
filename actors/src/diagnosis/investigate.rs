//! The reads that explain a blocked PDB: its pods (to find the one it waits for), and only
//! when that pod cannot be scheduled, the nodes in maintenance and the NodeMaintenances (to
//! tell a cross-node deadlock). At most three LISTs, each bounded: by the PDB's pods, by the
//! nodes in maintenance, by the NodeMaintenances.

use std::collections::BTreeMap;

use super::blocker::{Blocker, Cordoned};
use super::placement::{fits_if_uncordoned, waited_for};
use crate::model::OwnerRef;
use crate::pdb::{Pdb, structural};
use crate::ports::{Cluster, ClusterError};

/// What an investigation found, and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Investigation {
    /// The blocker, or the read that failed.
    pub blocker: Result<Blocker, ClusterError>,
    /// API requests made.
    pub reads: u32,
}

/// Explains why `pdb` allows no disruption now, for a pod controlled by `blocked_owner`.
pub async fn investigate(
    cluster: &dyn Cluster,
    pdb: &Pdb,
    blocked_owner: Option<&OwnerRef>,
) -> Investigation {
    let mut reads = 0;
    let blocker = explain(cluster, pdb, blocked_owner, &mut reads).await;
    Investigation { blocker, reads }
}

async fn explain(
    cluster: &dyn Cluster,
    pdb: &Pdb,
    blocked_owner: Option<&OwnerRef>,
    reads: &mut u32,
) -> Result<Blocker, ClusterError> {
    if let Some(why) = structural(pdb) {
        return Ok(Blocker::StructuralBudget {
            pdb: pdb.name.clone(),
            why,
        });
    }
    let (healthy, desired) = pdb
        .status
        .as_ref()
        .map_or((0, 0), |s| (s.current_healthy, s.desired_healthy));
    let waiting = |replacement| Blocker::WaitingForReplacement {
        pdb: pdb.name.clone(),
        replacement,
        healthy,
        desired,
    };
    let Some(selector) = &pdb.selector else {
        return Ok(waiting(None));
    };
    *reads += 1;
    let pods = cluster.list_selected_pods(&pdb.namespace, selector).await?;
    let Some(awaited) = waited_for(&pods, blocked_owner) else {
        return Ok(waiting(None));
    };
    let Some(scheduler_says) = &awaited.unschedulable else {
        return Ok(waiting(Some(awaited.pod_ref())));
    };
    *reads += 2;
    let nodes = cluster.list_maintained_nodes().await?;
    let maintenances = cluster.list_maintenances().await?;
    let by_node: BTreeMap<&str, &str> = maintenances
        .iter()
        .filter(|m| !m.deleting)
        .map(|m| (m.node_name.as_str(), m.name.as_str()))
        .collect();
    let mut cordoned: Vec<Cordoned> = nodes
        .iter()
        .filter(|node| fits_if_uncordoned(awaited, node))
        .filter_map(|node| {
            by_node.get(node.name.as_str()).map(|nm| Cordoned {
                maintenance: (*nm).into(),
                node: node.name.clone(),
            })
        })
        .collect();
    cordoned.sort();
    if cordoned.is_empty() {
        return Ok(Blocker::ReplacementUnschedulable {
            pdb: pdb.name.clone(),
            replacement: awaited.pod_ref(),
            why: scheduler_says.clone(),
        });
    }
    Ok(Blocker::CrossNodeDeadlock {
        pdb: pdb.name.clone(),
        replacement: awaited.pod_ref(),
        maintenances: cordoned,
    })
}
