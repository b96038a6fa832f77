//! Every manifest under deploy/ must load into its typed Kubernetes struct with nothing left
//! over, so that a typo in a field name fails here rather than on a cluster.

use std::path::{Path, PathBuf};

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ResourceQuota, Service, ServiceAccount};
use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

/// The YAML files under `dir`, recursively, except kustomize's own files.
fn manifest_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).expect("deploy/ is readable") {
            let path = entry.expect("directory entry").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if path.is_dir() {
                pending.push(path);
            } else if path
                .extension()
                .is_some_and(|extension| extension.eq_ignore_ascii_case("yaml"))
                && name != "kustomization.yaml"
            {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Every path present in `original` but missing or different in `reparsed`.
fn lost_fields(original: &Value, reparsed: &Value, path: &str, out: &mut Vec<String>) {
    match (original, reparsed) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                let here = format!("{path}.{key}");
                match b.get(key) {
                    Some(other) => lost_fields(value, other, &here, out),
                    None => out.push(here),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (index, (x, y)) in a.iter().zip(b).enumerate() {
                lost_fields(x, y, &format!("{path}[{index}]"), out);
            }
        }
        // YAML has no distinction a typed struct keeps between 1 and "1" for quantities and
        // int-or-string ports: compare their text.
        (Value::Number(n), Value::String(s)) | (Value::String(s), Value::Number(n)) => {
            if n.to_string() != *s {
                out.push(path.to_string());
            }
        }
        (a, b) if a == b => {}
        _ => out.push(path.to_string()),
    }
}

/// Parses `document` as `T` and reports every field the typed struct did not keep.
fn check_typed<T: DeserializeOwned + serde::Serialize>(document: &Value) -> Result<(), String> {
    let typed: T = serde_json::from_value(document.clone()).map_err(|e| e.to_string())?;
    let reparsed = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    let mut lost = Vec::new();
    lost_fields(document, &reparsed, "", &mut lost);
    if lost.is_empty() {
        Ok(())
    } else {
        Err(format!("unknown or mistyped fields: {}", lost.join(", ")))
    }
}

/// The minimum for an object of a type without a typed struct: a name and a spec.
fn check_named(document: &Value) -> Result<(), String> {
    match (document["metadata"]["name"].as_str(), document.get("spec")) {
        (Some(name), Some(_)) if !name.is_empty() => Ok(()),
        _ => Err("metadata.name and spec are required".to_string()),
    }
}

/// Checks one object: against its typed struct where there is one, else for what every object
/// needs. Also used on the kustomize builds (tests/it/packaging).
pub(crate) fn check_document(document: &Value) -> Result<(), String> {
    let api_version = document["apiVersion"].as_str().unwrap_or_default();
    let kind = document["kind"].as_str().unwrap_or_default();
    match (api_version, kind) {
        ("v1", "Namespace") => check_typed::<Namespace>(document),
        ("v1", "ServiceAccount") => check_typed::<ServiceAccount>(document),
        ("v1", "Service") => check_typed::<Service>(document),
        ("v1", "ResourceQuota") => check_typed::<ResourceQuota>(document),
        ("v1", "ConfigMap") => check_typed::<ConfigMap>(document),
        ("policy/v1", "PodDisruptionBudget") => check_typed::<PodDisruptionBudget>(document),
        ("nodemaintenance.medik8s.io/v1beta1", "NodeMaintenance") => {
            check_typed::<nmo::crd::NodeMaintenance>(document)
        }
        ("apps/v1", "Deployment") => check_typed::<Deployment>(document),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => check_typed::<ClusterRole>(document),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            check_typed::<ClusterRoleBinding>(document)
        }
        ("rbac.authorization.k8s.io/v1", "Role") => check_typed::<Role>(document),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => check_typed::<RoleBinding>(document),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
            check_typed::<CustomResourceDefinition>(document)
        }
        ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
            check_typed::<ValidatingWebhookConfiguration>(document)
        }
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy") => {
            check_typed::<ValidatingAdmissionPolicy>(document)
        }
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding") => {
            check_typed::<ValidatingAdmissionPolicyBinding>(document)
        }
        ("flowcontrol.apiserver.k8s.io/v1", "FlowSchema") => check_typed::<FlowSchema>(document),
        ("flowcontrol.apiserver.k8s.io/v1", "PriorityLevelConfiguration") => {
            check_typed::<PriorityLevelConfiguration>(document)
        }
        // Not Kubernetes API types (k8s-openapi has no struct for them): deliberately checked
        // only for what every object needs.
        ("cert-manager.io/v1", "Issuer" | "Certificate") => check_named(document),
        // Checked further by tests/it/packaging (the alerts' expressions, the bundle's CSV).
        ("monitoring.coreos.com/v1", "ServiceMonitor" | "PrometheusRule") => check_named(document),
        ("operators.coreos.com/v1alpha1", "ClusterServiceVersion") => check_named(document),
        ("kustomize.config.k8s.io/v1alpha1", "Component") => Ok(()),
        _ => Err(format!(
            "no typed check for {api_version} {kind}: add one to this test"
        )),
    }
}

fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("manifest is readable");
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).expect("manifest is YAML"))
        .filter(|doc| !doc.is_null())
        .collect()
}

#[test]
fn every_manifest_loads_into_its_typed_struct_with_no_field_lost() {
    let files = manifest_files(&deploy_dir());
    assert!(
        files.len() >= 5,
        "expected the deploy/ manifests, found {files:?}"
    );
    let mut failures = Vec::new();
    for file in &files {
        for (index, document) in documents(file).iter().enumerate() {
            if let Err(error) = check_document(document) {
                failures.push(format!("{} document {index}: {error}", file.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_misspelt_field_is_caught() {
    let document: Value = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "nmo", "namspace": "nmo-system"}
    });
    let error = check_document(&document).expect_err("a typo must be reported");
    assert!(error.contains(".metadata.namspace"), "{error}");
}

/// What a kustomization.yaml names: its resources (files or directories) and its patch files.
#[derive(Deserialize)]
struct Kustomization {
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    components: Vec<String>,
    #[serde(default)]
    patches: Vec<PatchRef>,
}

#[derive(Deserialize)]
struct PatchRef {
    path: Option<String>,
}

#[test]
fn kustomization_lists_every_manifest_in_deploy() {
    // Every directory of deploy/ that has a kustomization.yaml names what it has: a YAML file
    // left out would be forgotten by every entry point.
    let dir = deploy_dir();
    let mut kustomizations = Vec::new();
    let mut pending = vec![dir.clone()];
    while let Some(current) = pending.pop() {
        if current.join("kustomization.yaml").exists() {
            kustomizations.push(current.clone());
        }
        for entry in std::fs::read_dir(&current).expect("readable") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                pending.push(path);
            }
        }
    }
    assert!(
        kustomizations.len() >= 8,
        "expected deploy/'s kustomizations, found {kustomizations:?}"
    );
    for here in &kustomizations {
        let text = std::fs::read_to_string(here.join("kustomization.yaml")).expect("readable");
        let kustomization: Kustomization =
            serde_yaml::from_str(&text).expect("kustomization parses");
        let named: Vec<&String> = kustomization
            .resources
            .iter()
            .chain(&kustomization.components)
            .chain(kustomization.patches.iter().filter_map(|p| p.path.as_ref()))
            .collect();
        for resource in &named {
            assert!(
                here.join(resource).exists(),
                "{} names missing {resource}",
                here.display()
            );
        }
        let files: Vec<String> = manifest_files(here)
            .iter()
            .filter(|path| path.parent() == Some(here.as_path()))
            .filter_map(|path| path.file_name()?.to_str().map(str::to_string))
            .collect();
        for file in files {
            assert!(
                named.contains(&&file),
                "{file} is not in {}/kustomization.yaml",
                here.display()
            );
        }
    }
}
