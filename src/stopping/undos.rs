//! Waiting, on a stop, for the maintenances being deleted to give their nodes back.
//!
//! An undo takes a few requests (the node patch, the lease's deletion, the finalizer), well
//! under a second, but a stop that cut it short would leave it to the next leader, and an
//! uninstall has none: its NodeMaintenances (deleted with their CRD) would keep their
//! finalizer, the CRD would wait for them, and the node would stay cordoned. So before its
//! actors stop, a replica told to stop waits, up to `--graceful-shutdown-timeout`, until no
//! NodeMaintenance that carries nmo's finalizer is being deleted; while the CRD itself is
//! being deleted, until none carries it at all (the API server deletes them one by one).

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams};
use kube::core::CustomResourceExt;
use kube::{Client, Resource, ResourceExt};
use tokio::time::Instant;

use crate::crd::{FINALIZER, NodeMaintenance};

/// How often the NodeMaintenances are looked at while waiting.
const POLL: Duration = Duration::from_millis(250);

/// What the wait is waiting for, as last seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Pending {
    /// NodeMaintenances being deleted that still carry nmo's finalizer.
    deleting: usize,
    /// NodeMaintenances that carry nmo's finalizer.
    holding: usize,
    /// The CRD is being deleted (an uninstall): every NodeMaintenance goes.
    uninstalling: bool,
}

impl Pending {
    fn left(self) -> usize {
        if self.uninstalling {
            self.holding
        } else {
            self.deleting
        }
    }
}

/// Waits until the undos under way are done, at most `timeout`; each look has
/// `call_timeout`. Never fails: what is not done by then is the next leader's.
pub async fn let_undos_finish(client: &Client, timeout: Duration, call_timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let mut announced = false;
    loop {
        let pending = match tokio::time::timeout(call_timeout, look(client)).await {
            Ok(Ok(pending)) => pending,
            Ok(Err(error)) => {
                tracing::warn!(%error, "cannot tell whether maintenances are being undone; stopping");
                return;
            }
            Err(_) => {
                tracing::warn!("no answer in time about the maintenances being undone; stopping");
                return;
            }
        };
        if pending.left() == 0 {
            if announced {
                tracing::info!("every maintenance being deleted has given its node back");
            }
            return;
        }
        if Instant::now() >= deadline {
            tracing::warn!(
                left = pending.left(),
                uninstalling = pending.uninstalling,
                "stopping before every maintenance being deleted has given its node back; the next nmo finishes them"
            );
            return;
        }
        if !announced {
            announced = true;
            tracing::info!(
                left = pending.left(),
                uninstalling = pending.uninstalling,
                ?timeout,
                "waiting for the maintenances being deleted to give their nodes back before stopping"
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn look(client: &Client) -> Result<Pending, kube::Error> {
    let maintenances: Api<NodeMaintenance> = Api::all(client.clone());
    let list = maintenances.list_metadata(&ListParams::default()).await?;
    let ours = list
        .items
        .iter()
        .filter(|nm| nm.finalizers().iter().any(|f| f == FINALIZER));
    let (mut holding, mut deleting) = (0, 0);
    for nm in ours {
        holding += 1;
        deleting += usize::from(nm.metadata.deletion_timestamp.is_some());
    }
    let uninstalling = if holding > deleting {
        crd_deleting(client).await
    } else {
        false
    };
    Ok(Pending {
        deleting,
        holding,
        uninstalling,
    })
}

/// Whether the NodeMaintenance CRD is being deleted. A refusal (an older install's RBAC has
/// no such grant) counts as no.
async fn crd_deleting(client: &Client) -> bool {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    match crds.get_opt(NodeMaintenance::crd_name()).await {
        Ok(Some(crd)) => crd.meta().deletion_timestamp.is_some(),
        Ok(None) => true,
        Err(error) => {
            tracing::debug!(%error, "cannot read the NodeMaintenance CRD");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_uninstall_waits_for_every_maintenance_a_stop_for_those_being_deleted() {
        let stop = Pending {
            deleting: 1,
            holding: 3,
            uninstalling: false,
        };
        assert_eq!(stop.left(), 1);
        let uninstall = Pending {
            uninstalling: true,
            ..stop
        };
        assert_eq!(uninstall.left(), 3);
    }
}
