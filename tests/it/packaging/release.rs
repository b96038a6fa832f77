//! install.yaml, the release manifest: one file, deploy/install's kustomize build, regenerated
//! (never edited) and checked for drift like deploy/base/crd.yaml.

use super::support::{REGENERATE, check_generated, kustomize_text, repo};

/// How to bring the generated files back in line.
pub fn how_to_regenerate() -> String {
    format!("regenerate with `{REGENERATE}=1 cargo test --test it generated_`")
}

const HEADER: &str = "\
# nmo's release manifest: everything a first install needs, in one file.
#   kubectl apply -f install.yaml
# Generated: the kustomize build of deploy/install (`kubectl kustomize deploy/install`); do not
# edit (change deploy/ and regenerate: see docs/development.md). To uninstall, run
#   nmo uninstall
# or delete the NodeMaintenances first, then everything but the shared lease namespace
# medik8s-leases, which the other medik8s operators use:
#   kubectl delete nodemaintenances --all --wait
#   kubectl delete -f install.yaml -l app.kubernetes.io/name=nmo --ignore-not-found
# (the CRD and the nmo-system namespace carry that label too; the namespace's deletion may
# remove its objects before kubectl reaches them).
";

#[test]
fn generated_install_yaml_is_the_build_of_deploy_install() {
    let generated = format!("{HEADER}{}", kustomize_text(&repo().join("deploy/install")));
    check_generated("install.yaml", &generated, &how_to_regenerate());
}

#[test]
fn uninstalling_by_label_removes_everything_but_the_shared_lease_namespace() {
    let objects = super::support::build("install");
    for object in &objects {
        let (kind, name) = super::support::kind_of(object);
        let labelled = object["metadata"]["labels"]["app.kubernetes.io/name"] == "nmo";
        let shared = (kind, name) == ("Namespace", "medik8s-leases");
        assert!(
            labelled != shared,
            "{kind} {name}: labelled {labelled}, shared {shared}"
        );
    }
}
