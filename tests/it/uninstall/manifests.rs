//! `nmo uninstall` finds nmo's objects by label and kind: every object of every way to install
//! nmo from deploy/ (the release manifest, cert-manager's variant, the components) carries the
//! label and is of a kind it deletes, but the shared lease namespace, which it keeps.

use nmo::uninstall::{KINDS, NMO_LABEL};
use serde_json::Value;

use crate::packaging::support::{build, build_overlay};

/// Each way to install nmo, and its objects.
fn installs() -> Vec<(&'static str, Vec<Value>)> {
    vec![
        ("deploy/install", build("install")),
        ("deploy/install-no-webhook", build("install-no-webhook")),
        ("deploy/cert-manager", build("cert-manager")),
        (
            "deploy/install with the monitoring, GKE and flow-control components",
            build_overlay(
                &["deploy/install"],
                &[
                    "deploy/components/monitoring",
                    "deploy/components/gke-critical-pods",
                    "deploy/components/flow-control",
                ],
            ),
        ),
    ]
}

#[test]
fn uninstall_knows_every_object_of_every_install() {
    let (label, value) = NMO_LABEL.split_once('=').expect("key=value");
    for (install, objects) in installs() {
        assert!(!objects.is_empty(), "{install} builds nothing");
        for object in &objects {
            let api_version = object["apiVersion"].as_str().unwrap_or_default();
            let kind = object["kind"].as_str().unwrap_or_default();
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            if kind == "Namespace" && name == "medik8s-leases" {
                assert!(
                    nmo::uninstall::PROTECTED_NAMESPACES.contains(&name),
                    "the lease namespace is kept"
                );
                continue;
            }
            assert_eq!(
                object["metadata"]["labels"][label], value,
                "{install}: {kind} {name} is not labelled {NMO_LABEL}"
            );
            let known = kind == "CustomResourceDefinition"
                || KINDS.iter().any(|known| {
                    let known_version = if known.group.is_empty() {
                        known.version.to_string()
                    } else {
                        format!("{}/{}", known.group, known.version)
                    };
                    known.kind == kind && known_version == api_version
                });
            assert!(
                known,
                "{install}: nmo uninstall does not delete {api_version} {kind} ({name})"
            );
        }
    }
}
