//! The cluster reads the webhook needs, each one request through the kube client. Nothing is
//! cached: admission is rare and must see the latest state (a cache could allow a second
//! NodeMaintenance created a moment ago).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::ListParams;
use kube::{Api, Client};

use super::rules::{CONTROL_PLANE_LABELS, ETCD_NAMESPACE};
use crate::crd::NodeMaintenance;

/// The node, or `None` when the API server says it does not exist.
pub async fn node(client: &Client, name: &str) -> Result<Option<Node>, kube::Error> {
    Api::<Node>::all(client.clone()).get_opt(name).await
}

/// Every NodeMaintenance in the cluster (they are cluster scoped and few).
pub async fn maintenances(client: &Client) -> Result<Vec<NodeMaintenance>, kube::Error> {
    let list = Api::<NodeMaintenance>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    Ok(list.items)
}

/// The PDBs in `openshift-etcd`. A 404 (no such namespace or no policy API on this server)
/// means the same as an empty list: not OpenShift.
pub async fn etcd_pdbs(client: &Client) -> Result<Vec<PodDisruptionBudget>, kube::Error> {
    let api = Api::<PodDisruptionBudget>::namespaced(client.clone(), ETCD_NAMESPACE);
    match api.list(&ListParams::default()).await {
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
        Err(error) => Err(error),
    }
}

/// The etcd guard pods on one node, selected by the guard PDB's selector.
pub async fn guard_pods(
    client: &Client,
    selector: &str,
    node_name: &str,
) -> Result<Vec<Pod>, kube::Error> {
    let params = ListParams::default()
        .labels(selector)
        .fields(&format!("spec.nodeName={node_name}"));
    let list = Api::<Pod>::namespaced(client.clone(), ETCD_NAMESPACE)
        .list(&params)
        .await?;
    Ok(list.items)
}

/// The names of the nodes carrying either control-plane role label: two label-selected lists,
/// which return only the (few) control-plane nodes, never every node of a large cluster.
pub async fn control_plane_node_names(client: &Client) -> Result<BTreeSet<String>, kube::Error> {
    let api = Api::<Node>::all(client.clone());
    let mut names = BTreeSet::new();
    for label in CONTROL_PLANE_LABELS {
        let list = api.list(&ListParams::default().labels(label)).await?;
        names.extend(list.items.into_iter().filter_map(|node| node.metadata.name));
    }
    Ok(names)
}
