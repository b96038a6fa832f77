//! An install OLM manages is not `nmo uninstall`'s to remove: OLM would put back every object
//! it deleted, and the CRD belongs to OLM's bookkeeping. OLM labels what it creates from a
//! ClusterServiceVersion with `olm.owner` (the CSV's name) and `olm.owner.namespace`, so an
//! nmo Deployment with that label means: stop before anything is changed, and say how OLM
//! uninstalls it.

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams};

use super::{NMO_LABEL, UninstallError, bounded};

/// The label OLM puts on what a ClusterServiceVersion makes.
const OWNER_LABEL: &str = "olm.owner";
/// The namespace of that ClusterServiceVersion.
const OWNER_NAMESPACE_LABEL: &str = "olm.owner.namespace";

/// Fails when one of nmo's Deployments was made by OLM.
pub async fn refuse_if_managed(client: &kube::Client) -> Result<(), UninstallError> {
    let api: Api<Deployment> = Api::all(client.clone());
    let deployments = bounded(
        "list nmo's Deployments",
        api.list(&ListParams::default().labels(NMO_LABEL)),
    )
    .await?;
    for deployment in deployments.items {
        let labels = deployment.metadata.labels.unwrap_or_default();
        if let Some(csv) = labels.get(OWNER_LABEL) {
            return Err(UninstallError::ManagedByOlm {
                csv: csv.clone(),
                namespace: labels
                    .get(OWNER_NAMESPACE_LABEL)
                    .or(deployment.metadata.namespace.as_ref())
                    .cloned()
                    .unwrap_or_default(),
            });
        }
    }
    Ok(())
}
