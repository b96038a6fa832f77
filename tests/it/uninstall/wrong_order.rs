//! `kubectl delete -f install.yaml` while a NodeMaintenance still holds a node (the wrong
//! order: the docs say to end the maintenances first, people still do it). The CRD's deletion
//! deletes the NodeMaintenance, and in the same second nmo's RBAC, its ServiceAccount and its
//! namespace go, and its pod is told to stop. nmo must still give the node back (uncordon,
//! untaint, unlabel, delete the lease, release the finalizer), so that the CRD and everything
//! else can go, rather than leave the node cordoned and its lease blocking Node Health Check and
//! Self Node Remediation for an hour.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use nmo::crd::NodeMaintenance;

use super::installed::{CRD, DELETE_INSTALL, GRACE_PERIOD, Installed, NMO_NAMESPACE, Nmo};
use crate::support::eventually;

pub(super) fn install_options() -> nmo::operator::OperatorOptions {
    nmo::operator::OperatorOptions {
        leader_elect: true,
        pod_namespace: Some(NMO_NAMESPACE.into()),
        pod_name: Some("nmo-0".into()),
        metrics_bind_address: "0".into(),
        health_probe_bind_address: "0".into(),
        ..nmo::operator::OperatorOptions::default()
    }
}

/// The release manifest's own uninstall command, typed before the maintenances were ended: the
/// API server refuses to delete what nmo needs while the maintenance holds its node, and says
/// why; the CRD's deletion ends the maintenance, nmo gives the node back, and the same command
/// run again removes the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_install_before_the_maintenances_strands_no_node() {
    let node = "worker-1";
    let (cluster, nmo) = in_maintenance("nm-1", node).await;

    let first = cluster.kubectl(&DELETE_INSTALL);
    let refused = String::from_utf8_lossy(&first.stderr).into_owned();
    assert!(
        !first.status.success() && refused.contains("nmo-uninstall-guard"),
        "nmo's objects are kept while the maintenance holds its node: {refused}"
    );
    assert!(
        refused.contains("NodeMaintenance nm-1 still holds node worker-1")
            && refused.contains("kubectl delete nodemaintenances --all --wait"),
        "the refusal says why and what to do: {refused}"
    );
    given_back(&cluster, node, &None).await;
    assert!(
        !nmo.is_finished(),
        "nmo's Deployment and namespace stay meanwhile"
    );

    cluster.kubectl_ok(&DELETE_INSTALL);
    // The namespace's deletion deletes the pod: SIGTERM, and the kill after the grace period.
    let stopped = nmo.terminate(GRACE_PERIOD).await;
    assert!(
        stopped.as_ref().is_some_and(Result::is_ok),
        "nmo stops cleanly within its grace period: {stopped:?}"
    );
    nothing_of_nmo_left(&cluster).await;
}

/// nmo's rights taken first (RBAC, ServiceAccount and namespace by kind, as a tool that prunes
/// kind by kind would), the CRD after: every one of those deletions is refused while the
/// maintenance holds its node, so nmo can still undo the maintenance the CRD's deletion
/// deletes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_nmo_s_rights_before_its_crd_strands_no_node() {
    let node = "worker-2";
    let (cluster, nmo) = in_maintenance("nm-2", node).await;

    for kinds in [
        "clusterrolebinding,clusterrole",
        "rolebinding,role,serviceaccount,deployment",
    ] {
        let refused = cluster.kubectl(&[
            "delete",
            kinds,
            "-l",
            "app.kubernetes.io/name=nmo",
            "--all-namespaces",
            "--wait=false",
        ]);
        assert!(!refused.status.success(), "{kinds} deleted");
    }
    let refused = cluster.kubectl(&["delete", "namespace", NMO_NAMESPACE, "--wait=false"]);
    assert!(!refused.status.success(), "nmo's namespace deleted");
    cluster.kubectl_ok(&["delete", "crd", CRD, "--wait=false"]);
    given_back(&cluster, node, &None).await;

    cluster.kubectl_ok(&DELETE_INSTALL);
    let stopped = nmo.terminate(GRACE_PERIOD).await;
    assert!(stopped.as_ref().is_some_and(Result::is_ok), "{stopped:?}");
    nothing_of_nmo_left(&cluster).await;
}

/// The install with nmo running and `node` in maintenance for `nm`.
pub(super) async fn in_maintenance(nm: &str, node: &str) -> (Installed, Nmo) {
    let cluster = Installed::start(node).await;
    let nmo = cluster.start_nmo(install_options());
    cluster.create_maintenance(nm, node).await;
    cluster.wait_in_maintenance(node).await;
    (cluster, nmo)
}

/// Waits until `node` is given back and the NodeMaintenance CRD is gone (so no
/// NodeMaintenance kept its finalizer).
async fn given_back(cluster: &Installed, node: &str, stopped: &Option<Result<(), String>>) {
    eventually("the node given back", Duration::from_secs(30), async || {
        let left = cluster.left_on_node(node).await;
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("{left:?} (nmo stopped: {stopped:?})"))
        }
    })
    .await;
    let maintenances: Api<NodeMaintenance> = Api::all(cluster.admin.clone());
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.admin.clone());
    eventually(
        "the NodeMaintenances and the CRD gone",
        Duration::from_secs(60),
        async || {
            let Some(_) = crds.get_opt(CRD).await.ok().flatten() else {
                return Ok(());
            };
            let left: Vec<_> = maintenances
                .list(&Default::default())
                .await
                .map(|list| list.items)
                .unwrap_or_default()
                .into_iter()
                .map(|nm| (nm.metadata.name, nm.metadata.finalizers))
                .collect();
            Err(format!(
                "the CRD is still there; NodeMaintenances: {left:?}"
            ))
        },
    )
    .await;
}

/// Waits until nothing of nmo's install is left but the shared lease namespace.
pub(super) async fn nothing_of_nmo_left(cluster: &Installed) {
    eventually("nothing of nmo left", Duration::from_secs(90), async || {
        let left = cluster.kubectl_ok(&[
            "get",
            "namespace,deployment,serviceaccount,role,rolebinding,clusterrole,clusterrolebinding,\
             validatingadmissionpolicy,validatingadmissionpolicybinding",
            "-l",
            "app.kubernetes.io/name=nmo",
            "--all-namespaces",
            "-o",
            "name",
        ]);
        if left.trim().is_empty() {
            Ok(())
        } else {
            Err(left)
        }
    })
    .await;
    cluster.kubectl_ok(&["get", "namespace", "medik8s-leases"]);
}
