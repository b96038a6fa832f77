//! What a CREATE review reads: the node and the other NodeMaintenances from the webhook's
//! caches (`caches`), and, only for a control-plane node on OpenShift, the etcd quorum guard's
//! budget and pods, each one request through the kube client.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::ListParams;
use kube::{Api, Client};

use super::caches::Caches;
use super::rules::ETCD_NAMESPACE;

/// Where a review's reads go; cheap to clone.
#[derive(Clone)]
pub struct Lookups {
    /// For the reads the caches do not hold.
    pub client: Client,
    /// Nodes and NodeMaintenances.
    pub caches: Caches,
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
