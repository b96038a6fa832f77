//! Applying a project's manifests: its CustomResourceDefinitions, and its RBAC exactly as
//! packaged (roles, bindings, service accounts), by server-side apply so that a repeat, or a
//! second test of the same binary, changes nothing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::calls::within;
use crate::error::{Error, Result};
use crate::identity::Identity;

/// The field manager of everything the harness applies.
const FIELD_MANAGER: &str = "nmo-envtest";

/// How long a CRD may take to be Established.
const ESTABLISH_DEADLINE: Duration = Duration::from_secs(30);

/// One object of a manifest file.
#[derive(Clone, Debug)]
pub struct Manifest {
    /// The file it came from.
    pub path: PathBuf,
    /// The object.
    pub object: Value,
}

impl Manifest {
    fn kind(&self) -> &str {
        self.object["kind"].as_str().unwrap_or_default()
    }

    fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap_or_default()
    }

    fn namespace(&self) -> Option<&str> {
        self.object["metadata"]["namespace"].as_str()
    }

    fn invalid(&self, reason: impl Into<String>) -> Error {
        Error::Manifest {
            path: self.path.clone(),
            reason: reason.into(),
        }
    }
}

/// The `.yaml` and `.yml` files directly in `dir`, sorted: what `deploy/*.yaml` names.
pub fn yaml_files_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir)
        .map_err(|source| Error::io(format!("listing {}", dir.display()), source))?;
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.is_file()
                && matches!(
                    path.extension().and_then(|ext| ext.to_str()),
                    Some("yaml" | "yml")
                )
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Every object in `paths` (multi-document YAML; empty documents skipped).
pub fn load(paths: &[PathBuf]) -> Result<Vec<Manifest>> {
    let mut manifests = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(path)
            .map_err(|source| Error::io(format!("reading {}", path.display()), source))?;
        for document in serde_yaml::Deserializer::from_str(&text) {
            let object: Value =
                serde::Deserialize::deserialize(document).map_err(|error| Error::Manifest {
                    path: path.clone(),
                    reason: error.to_string(),
                })?;
            if object.is_object() {
                manifests.push(Manifest {
                    path: path.clone(),
                    object,
                });
            }
        }
    }
    Ok(manifests)
}

/// Server-side applies `manifest` through `api`.
async fn apply<K>(api: Api<K>, manifest: &Manifest) -> Result<K>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let name = manifest.name();
    if name.is_empty() {
        return Err(manifest.invalid(format!("a {} without a name", manifest.kind())));
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    within(
        format!(
            "applying {} {name} from {}",
            manifest.kind(),
            manifest.path.display()
        ),
        api.patch(name, &params, &Patch::Apply(&manifest.object)),
    )
    .await
}

/// The API of a cluster-scoped kind.
fn cluster<K>(client: &kube::Client) -> Api<K>
where
    K: kube::Resource<DynamicType = ()>,
{
    Api::all(client.clone())
}

/// The API of a namespaced kind in `manifest`'s namespace.
fn namespaced<K>(client: &kube::Client, manifest: &Manifest) -> Result<Api<K>>
where
    K: kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>,
{
    let namespace = manifest.namespace().ok_or_else(|| {
        manifest.invalid(format!(
            "{} {} has no namespace",
            manifest.kind(),
            manifest.name()
        ))
    })?;
    Ok(Api::namespaced(client.clone(), namespace))
}

/// Applies the CustomResourceDefinitions in `paths` (other objects are skipped; none at all is
/// an error) and waits until each is Established. Returns their names.
pub async fn install_crds(client: &kube::Client, paths: &[PathBuf]) -> Result<Vec<String>> {
    let manifests = load(paths)?;
    let crds: Vec<&Manifest> = manifests
        .iter()
        .filter(|manifest| manifest.kind() == "CustomResourceDefinition")
        .collect();
    if crds.is_empty() {
        return Err(Error::Manifest {
            path: paths.first().cloned().unwrap_or_default(),
            reason: format!("no CustomResourceDefinition in {paths:?}"),
        });
    }
    let mut names = Vec::new();
    for manifest in crds {
        apply(cluster::<CustomResourceDefinition>(client), manifest).await?;
        names.push(manifest.name().to_string());
    }
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in &names {
        wait_established(&api, name).await?;
    }
    Ok(names)
}

async fn wait_established(api: &Api<CustomResourceDefinition>, name: &str) -> Result<()> {
    let began = Instant::now();
    loop {
        let crd = within(format!("reading CRD {name}"), api.get(name)).await?;
        let established = crd
            .status
            .and_then(|status| status.conditions)
            .unwrap_or_default()
            .iter()
            .any(|condition| condition.type_ == "Established" && condition.status == "True");
        if established {
            return Ok(());
        }
        if began.elapsed() > ESTABLISH_DEADLINE {
            return Err(Error::Timeout {
                what: format!("CRD {name} becoming Established"),
                waited: ESTABLISH_DEADLINE,
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What [`crate::ControlPlane::apply_rbac`] applied.
#[derive(Clone, Debug, Default)]
pub struct AppliedRbac {
    /// `Kind namespace/name` of each object applied, in order.
    pub objects: Vec<String>,
    /// The users and service accounts the bindings name (groups are not identities).
    pub subjects: Vec<Identity>,
}

/// Applies the RBAC of `paths` exactly as written: ServiceAccounts, ClusterRoles, Roles and
/// their bindings (other kinds are skipped), creating the namespaces the namespaced ones live
/// in when missing (only those: a namespace the workload itself creates is left to it).
/// Returns what was applied and the identities the bindings bind.
pub async fn apply_rbac(client: &kube::Client, paths: &[PathBuf]) -> Result<AppliedRbac> {
    let manifests = load(paths)?;
    let rank = |kind: &str| match kind {
        "ServiceAccount" => Some(0),
        "ClusterRole" | "Role" => Some(1),
        "ClusterRoleBinding" | "RoleBinding" => Some(2),
        _ => None,
    };
    let mut selected: Vec<&Manifest> = manifests
        .iter()
        .filter(|manifest| rank(manifest.kind()).is_some())
        .collect();
    selected.sort_by_key(|manifest| rank(manifest.kind()));

    let namespaces: BTreeSet<&str> = selected
        .iter()
        .filter(|manifest| matches!(manifest.kind(), "ServiceAccount" | "Role" | "RoleBinding"))
        .filter_map(|manifest| manifest.namespace())
        .collect();
    for namespace in namespaces {
        let manifest = Manifest {
            path: PathBuf::from("(namespace of the RBAC manifests)"),
            object: json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        };
        apply(cluster::<Namespace>(client), &manifest).await?;
    }

    let mut applied = AppliedRbac::default();
    for manifest in selected {
        match manifest.kind() {
            "ServiceAccount" => {
                apply(namespaced::<ServiceAccount>(client, manifest)?, manifest).await?;
            }
            "ClusterRole" => {
                apply(cluster::<ClusterRole>(client), manifest).await?;
            }
            "Role" => {
                apply(namespaced::<Role>(client, manifest)?, manifest).await?;
            }
            "ClusterRoleBinding" => {
                apply(cluster::<ClusterRoleBinding>(client), manifest).await?;
            }
            _ => {
                apply(namespaced::<RoleBinding>(client, manifest)?, manifest).await?;
            }
        }
        applied.objects.push(format!(
            "{} {}{}",
            manifest.kind(),
            manifest
                .namespace()
                .map(|namespace| format!("{namespace}/"))
                .unwrap_or_default(),
            manifest.name()
        ));
        for subject in manifest.object["subjects"].as_array().into_iter().flatten() {
            let name = subject["name"].as_str().unwrap_or_default();
            let identity = match subject["kind"].as_str() {
                Some("ServiceAccount") => Identity::service_account(
                    subject["namespace"]
                        .as_str()
                        .or(manifest.namespace())
                        .unwrap_or_default(),
                    name,
                ),
                Some("User") => Identity::user(name, Vec::<String>::new()),
                _ => continue,
            };
            if !applied.subjects.contains(&identity) {
                applied.subjects.push(identity);
            }
        }
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace_deploy() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/base")
    }

    #[test]
    fn the_deploy_directory_lists_its_yaml_files() {
        let files = yaml_files_in(&workspace_deploy()).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert!(names.contains(&"rbac.yaml".to_string()), "{names:?}");
        assert!(names.contains(&"crd.yaml".to_string()), "{names:?}");
        assert!(names.windows(2).all(|pair| pair[0] <= pair[1]));
    }

    #[test]
    fn multi_document_files_load_every_object() {
        let rbac = load(&[workspace_deploy().join("rbac.yaml")]).unwrap();
        let kinds: Vec<&str> = rbac.iter().map(Manifest::kind).collect();
        assert!(
            kinds.contains(&"ClusterRole") && kinds.contains(&"RoleBinding"),
            "{kinds:?}"
        );
    }

    #[test]
    fn broken_yaml_names_its_file() {
        let path =
            std::env::temp_dir().join(format!("nmo-envtest-bad-{}.yaml", std::process::id()));
        std::fs::write(&path, "kind: [unclosed").unwrap();
        let error = load(std::slice::from_ref(&path)).unwrap_err().to_string();
        std::fs::remove_file(&path).unwrap();
        assert!(error.contains(&path.display().to_string()), "{error}");
    }
}
