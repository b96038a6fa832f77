//! `nmo uninstall`: removes nmo without stranding a node. It first makes sure nmo was not
//! installed by OLM (`olm`: OLM would put back what it deletes); then, in this order, each step
//! only once the one before is done:
//!
//! 1. `maintenances`: deletes every NodeMaintenance and waits until nmo has given each node
//!    back and released its finalizer. If they do not end within `--timeout` (nmo is not
//!    running, say), it stops there, nothing of nmo deleted, so that nmo can still end them.
//! 2. The CRD, unless `--keep-crd`, and waits until it is gone: from then on no new
//!    NodeMaintenance can appear, and one created meanwhile is ended by the still running nmo.
//! 3. `objects`: every object labelled `app.kubernetes.io/name=nmo`, the Deployment first,
//!    the namespaces last, never a shared namespace (`medik8s-leases`, where the other medik8s
//!    operators keep their leases).
//!
//! Run again, it does what is left: a 404 is success, every step is a delete or a read.

mod error;
mod maintenances;
mod objects;
mod olm;

use std::io::Write;
use std::time::Duration;

use crate::cli::cluster_access::ClusterArgs;
use crate::cli::duration::parse_duration;

pub use error::UninstallError;
pub use objects::{KINDS, Kind, PROTECTED_NAMESPACES};

/// The label every object of nmo's manifests carries.
pub const NMO_LABEL: &str = "app.kubernetes.io/name=nmo";
/// How long one API call may take.
const CALL_DEADLINE: Duration = Duration::from_secs(15);
/// How often the cluster is read again while waiting.
const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Flags of `nmo uninstall`.
#[derive(Debug, Clone, clap::Args)]
pub struct UninstallArgs {
    /// How long to wait for the NodeMaintenances to end, and then for nmo's objects to go.
    #[arg(long, value_parser = parse_duration, default_value = "5m")]
    pub timeout: Duration,
    /// Keep the NodeMaintenance CRD, for another operator that uses NodeMaintenances.
    #[arg(long)]
    pub keep_crd: bool,
    /// The cluster.
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// `nmo uninstall`: reports its progress to `out`.
pub async fn run(args: &UninstallArgs, out: &mut (dyn Write + Send)) -> Result<(), UninstallError> {
    let client = args.cluster.client().await?;
    uninstall(&client, args, out).await
}

/// The three steps of the module's doc, against `client`.
pub async fn uninstall(
    client: &kube::Client,
    args: &UninstallArgs,
    out: &mut (dyn Write + Send),
) -> Result<(), UninstallError> {
    olm::refuse_if_managed(client).await?;
    maintenances::end_all(client, args.timeout, out).await?;
    if !args.keep_crd {
        objects::remove_crd(client, args.timeout, out).await?;
    }
    objects::remove_all(client, args.timeout, out).await?;
    writeln!(
        out,
        "nmo is uninstalled{}; namespace {} is kept, the other medik8s operators use it",
        if args.keep_crd { ", its CRD kept" } else { "" },
        nmo_actors::config::defaults::LEASE_NAMESPACE,
    )?;
    Ok(())
}

/// Runs one API call under [`CALL_DEADLINE`].
async fn bounded<T>(
    what: impl Into<String>,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, UninstallError> {
    match tokio::time::timeout(CALL_DEADLINE, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(source)) => Err(UninstallError::Api {
            what: what.into(),
            source,
        }),
        Err(_) => Err(UninstallError::CallTimeout {
            what: what.into(),
            after: CALL_DEADLINE,
        }),
    }
}

/// Whether `error` is the API server's 404.
fn is_not_found(error: &UninstallError) -> bool {
    matches!(
        error,
        UninstallError::Api {
            source: kube::Error::Api(response),
            ..
        } if response.code == 404
    )
}
