//! docs/install.md's install and uninstall commands, typed as a user would, against a real
//! kube-apiserver: every object of both install paths is accepted (schema, RBAC escalation
//! checks, webhook configuration), the CRD serves NodeMaintenances, and both uninstalls remove
//! nmo while the `medik8s-leases` namespace the other medik8s operators share stays.
//!
//! The control plane is this test's own (etcd and kube-apiserver only): installing and deleting
//! the CRD on the shared one would pull it from under the end-to-end tests. Nothing runs the
//! Deployment (no kubelet, no image here), so what is checked is what the API server decides.

use nmo_envtest::{ControlPlane, Options};

use super::support::Kubectl;

/// cert-manager's two kinds that `deploy/cert-manager` uses, as bare CRDs that accept any spec: what a
/// cluster with cert-manager serves, without its validation (its CRDs are not copied here).
fn cert_manager_kinds() -> String {
    [("Issuer", "issuer"), ("Certificate", "certificate")]
        .map(|(kind, singular)| {
            format!(
                "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {singular}s.cert-manager.io
spec:
  group: cert-manager.io
  scope: Namespaced
  names: {{kind: {kind}, plural: {singular}s, singular: {singular}, listKind: {kind}List}}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
"
            )
        })
        .join("---\n")
}

const CRD: &str = "crd/nodemaintenances.nodemaintenance.medik8s.io";
const WEBHOOK: &str = "validatingwebhookconfiguration/nmo-validating-webhook";

#[test]
fn both_install_paths_are_accepted_by_a_real_api_server_and_uninstalls_keep_the_lease_namespace() {
    // The controller manager finishes deleted namespaces; nothing needs the scheduler.
    let options = Options {
        scheduler: false,
        ..Options::default()
    };
    let plane = ControlPlane::start(options).expect("a control plane of its own");
    let kubectl = Kubectl(&plane);

    // Without cert-manager: the webhook disabled.
    kubectl.ok(&["apply", "-k", "deploy/install-no-webhook"]);
    kubectl.established(CRD);
    assert!(kubectl.exists(&["deployment/nmo", "-n", "nmo-system"]));
    assert!(!kubectl.exists(&[WEBHOOK]));
    // The CRD serves the sample (no webhook stands in the way; nmo does not run, so no
    // finalizer holds it).
    kubectl.ok(&["apply", "-k", "deploy/samples"]);
    kubectl.ok(&["delete", "-k", "deploy/samples"]);
    // docs/install.md's uninstall from a checkout.
    kubectl.ok(&[
        "delete",
        "-k",
        "deploy/no-webhook",
        "--wait=false",
        "--ignore-not-found",
    ]);
    kubectl.gone(&[CRD, "namespace/nmo-system", "clusterrole/nmo-manager"]);
    assert!(kubectl.exists(&["namespace/medik8s-leases"]));

    // With cert-manager, as an option.
    let kinds = plane.data_dir().join("cert-manager-kinds.yaml");
    std::fs::write(&kinds, cert_manager_kinds()).expect("write the cert-manager kinds");
    kubectl.ok(&["apply", "-f", &kinds.to_string_lossy()]);
    kubectl.established("crd/issuers.cert-manager.io");
    kubectl.established("crd/certificates.cert-manager.io");
    kubectl.ok(&["apply", "-k", "deploy/cert-manager"]);
    kubectl.established(CRD);
    assert!(kubectl.exists(&[WEBHOOK]));
    assert!(kubectl.exists(&["certificate/nmo-webhook", "-n", "nmo-system"]));
    assert!(kubectl.exists(&["deployment/nmo", "-n", "nmo-system"]));
    kubectl.ok(&[
        "delete",
        "-k",
        "deploy/cert-manager",
        "--wait=false",
        "--ignore-not-found",
    ]);
    kubectl.gone(&[CRD, WEBHOOK, "namespace/nmo-system"]);

    // The release manifest, one command, on a cluster with nothing else.
    kubectl.ok(&["apply", "-f", "install.yaml"]);
    kubectl.established(CRD);
    assert!(kubectl.exists(&[WEBHOOK]));
    assert!(kubectl.exists(&["deployment/nmo", "-n", "nmo-system"]));
    // The uninstall without a checkout: by nmo's label, so the shared namespace stays.
    kubectl.ok(&crate::uninstall::installed::DELETE_INSTALL);
    kubectl.gone(&[CRD, WEBHOOK, "namespace/nmo-system"]);
    let phase = kubectl.ok(&[
        "get",
        "namespace/medik8s-leases",
        "-o",
        "jsonpath={.status.phase}",
    ]);
    assert_eq!(phase, "Active");
}
