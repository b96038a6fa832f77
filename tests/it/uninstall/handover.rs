//! Removing nmo but keeping its maintenances, to hand them to another operator, as
//! docs/install.md says: the uninstall guard's binding deleted first, then everything of nmo
//! but its CRD. The NodeMaintenance stays, with its finalizer, and its node stays in maintenance
//! for the next operator to carry on.

use std::time::Duration;

use nmo::crd::NodeMaintenance;

use super::installed::{CRD, GRACE_PERIOD};
use super::wrong_order::{in_maintenance, nothing_of_nmo_left};
use crate::packaging::support::Kubectl;
use crate::support::eventually;

/// docs/install.md's commands that remove nmo but its CRD, once the guard's binding is gone.
const HAND_OVER: [&[&str]; 2] = [
    &[
        "delete",
        "validatingwebhookconfiguration,validatingadmissionpolicy,clusterrolebinding,clusterrole,\
         namespace",
        "-l",
        "app.kubernetes.io/name=nmo",
        "--ignore-not-found",
    ],
    &[
        "delete",
        "rolebinding,role",
        "-l",
        "app.kubernetes.io/name=nmo",
        "--all-namespaces",
        "--ignore-not-found",
    ],
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_guard_nmo_goes_and_its_maintenances_stay() {
    let node = "worker-h1";
    let (cluster, nmo) = in_maintenance("nm-h1", node).await;

    cluster.kubectl_ok(&[
        "delete",
        "validatingadmissionpolicybinding",
        "nmo-uninstall-guard",
    ]);
    // The API server drops a deleted binding from its policy cache a moment later, so the
    // deletes are refused until then; the docs say to run them again.
    eventually(
        "nmo deleted once the guard's binding is dropped",
        Duration::from_secs(30),
        async || {
            for delete in HAND_OVER {
                let done = cluster.kubectl(delete);
                if !done.status.success() {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    return Err(String::from_utf8_lossy(&done.stderr).into_owned());
                }
            }
            Ok(())
        },
    )
    .await;
    nmo.terminate(GRACE_PERIOD).await;
    nothing_of_nmo_left(&cluster).await;

    assert!(
        Kubectl(cluster.plane).exists(&["crd", CRD]),
        "the CRD stays"
    );
    let maintenances: kube::Api<NodeMaintenance> = kube::Api::all(cluster.admin.clone());
    let kept = maintenances
        .get("nm-h1")
        .await
        .expect("the NodeMaintenance stays");
    assert!(
        kept.metadata.deletion_timestamp.is_none()
            && kept
                .metadata
                .finalizers
                .unwrap_or_default()
                .contains(&nmo::crd::FINALIZER.to_string()),
        "it keeps its finalizer, for the next operator"
    );
    let left = cluster.left_on_node(node).await;
    assert!(
        left.contains(&"cordoned".to_string())
            && left.contains(&"leased by node-maintenance".to_string()),
        "the node stays in maintenance: {left:?}"
    );
}
