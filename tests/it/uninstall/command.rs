//! `nmo uninstall`, the built binary with the admin's kubeconfig, against the release manifest
//! with nmo running: it ends the maintenances, waits until nmo has given their nodes back, then
//! removes nmo but the shared lease namespace; and when the maintenances cannot end (nmo is not
//! running) it deletes nothing of nmo and says why.

use crate::support::assert_success;
use std::process::Output;

use nmo_envtest::Identity;

use crate::packaging::support::Kubectl;

use super::installed::{CRD, GRACE_PERIOD, Installed, LEASE_NAMESPACE};
use super::wrong_order::{in_maintenance, install_options, nothing_of_nmo_left};

/// What `kubectl get` lists of nmo's objects (the kinds the uninstall guard protects, plus the
/// webhook configuration and the Services).
const NMO_KINDS: &str = "namespace,deployment,service,serviceaccount,role,rolebinding,clusterrole,\
                         clusterrolebinding,validatingwebhookconfiguration,\
                         validatingadmissionpolicy,validatingadmissionpolicybinding";

/// Runs `nmo uninstall` with the admin's kubeconfig and `args`.
async fn uninstall(cluster: &Installed, args: &[&str]) -> Output {
    let kubeconfig = cluster
        .plane
        .kubeconfig_path(&Identity::admin())
        .expect("the admin's kubeconfig");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_nmo"));
    command
        .arg("uninstall")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args);
    tokio::task::spawn_blocking(move || command.output().expect("nmo runs"))
        .await
        .expect("nmo uninstall finished")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// nmo's objects as `kubectl get` names them, sorted.
fn nmo_objects(cluster: &Installed) -> String {
    cluster.kubectl_ok(&[
        "get",
        NMO_KINDS,
        "-l",
        "app.kubernetes.io/name=nmo",
        "--all-namespaces",
        "-o",
        "name",
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_gives_every_node_back_and_removes_nmo_but_the_lease_namespace() {
    let node = "worker-u1";
    let (cluster, nmo) = in_maintenance("nm-u1", node).await;

    let done = uninstall(&cluster, &["--timeout=60s"]).await;
    let (stdout, stderr) = (text(&done.stdout), text(&done.stderr));
    assert!(done.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("ending 1 NodeMaintenance(s): nm-u1 on node worker-u1"),
        "it says which maintenances it ends, on which nodes: {stdout}"
    );
    assert_eq!(
        cluster.left_on_node(node).await,
        Vec::<String>::new(),
        "the node is given back"
    );
    assert!(
        !Kubectl(cluster.plane).exists(&["crd", CRD]),
        "the CRD is deleted"
    );
    // The Deployment's deletion deletes nmo's pod: SIGTERM.
    let stopped = nmo.terminate(GRACE_PERIOD).await;
    assert!(stopped.is_some(), "nmo stops within its grace period");
    nothing_of_nmo_left(&cluster).await;
    cluster.kubectl_ok(&["get", "namespace", LEASE_NAMESPACE]);

    let again = uninstall(&cluster, &["--timeout=10s"]).await;
    assert_success(&again, "run again, it has nothing left to do");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_deletes_nothing_of_nmo_while_the_maintenances_cannot_end() {
    let node = "worker-u2";
    let (cluster, nmo) = in_maintenance("nm-u2", node).await;
    assert!(nmo.terminate(GRACE_PERIOD).await.is_some(), "nmo stops");
    let before = nmo_objects(&cluster);

    let refused = uninstall(&cluster, &["--timeout=3s"]).await;
    let stderr = text(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains("nothing of nmo was deleted")
            && stderr.contains("nm-u2 on node worker-u2")
            && stderr.contains("Deployment nmo-system/nmo has 0 of 2 replica(s) ready"),
        "it says which maintenance is left and why: {stderr}"
    );
    assert_eq!(nmo_objects(&cluster), before, "nothing of nmo is deleted");
    assert!(
        Kubectl(cluster.plane).exists(&["crd", CRD]),
        "the CRD is kept"
    );
    assert!(
        cluster
            .left_on_node(node)
            .await
            .contains(&"cordoned".to_string()),
        "the node stays in maintenance, for nmo to give back"
    );

    // nmo back: it ends the maintenance the first run deleted, and the same command finishes.
    let nmo = cluster.start_nmo(install_options());
    let done = uninstall(&cluster, &["--timeout=60s"]).await;
    assert_success(&done, "nmo uninstall, nmo back");
    assert_eq!(cluster.left_on_node(node).await, Vec::<String>::new());
    nmo.terminate(GRACE_PERIOD).await;
    nothing_of_nmo_left(&cluster).await;
}

/// An nmo that OLM installed (its Deployment carries OLM's `olm.owner` labels, as OLM puts on
/// what a ClusterServiceVersion makes): OLM would put back whatever was deleted, so the command
/// changes nothing, not even the maintenances, and says how OLM uninstalls it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_changes_nothing_of_an_install_olm_manages() {
    let cluster = Installed::start("worker-u3").await;
    cluster.create_maintenance("nm-u3", "worker-u3").await;
    cluster.kubectl_ok(&[
        "label",
        "deployment",
        "nmo",
        "-n",
        "nmo-system",
        "olm.owner=nmo.v0.1.0",
        "olm.owner.namespace=operators",
    ]);
    let before = nmo_objects(&cluster);

    let refused = uninstall(&cluster, &["--timeout=10s"]).await;
    let stderr = text(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains("OLM manages this nmo (ClusterServiceVersion operators/nmo.v0.1.0)"),
        "{stderr}"
    );
    assert_eq!(nmo_objects(&cluster), before, "nothing of nmo is deleted");
    let maintenances: kube::Api<nmo::crd::NodeMaintenance> = kube::Api::all(cluster.admin.clone());
    let kept = maintenances
        .get("nm-u3")
        .await
        .expect("the maintenance stays");
    assert!(
        kept.metadata.deletion_timestamp.is_none(),
        "and is not deleted"
    );
}
