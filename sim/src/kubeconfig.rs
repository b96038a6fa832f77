//! kubeconfig files pointing at the simulator (for kubectl and kube's `Config::infer`).

use std::path::Path;

use crate::errors::SimError;

/// The kubeconfig YAML for a server URL and an optional bearer token.
pub fn kubeconfig_yaml(server: &str, token: Option<&str>, namespace: &str) -> String {
    let user = match token {
        Some(t) => format!("    token: {t}\n"),
        None => "    {}\n".to_string(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: nmo-sim\n  cluster:\n    server: {server}\ncontexts:\n- name: nmo-sim\n  context:\n    cluster: nmo-sim\n    user: nmo-sim\n    namespace: {namespace}\ncurrent-context: nmo-sim\nusers:\n- name: nmo-sim\n  user:\n{user}preferences: {{}}\n"
    )
}

/// Writes a kubeconfig file.
pub fn write(path: &Path, server: &str, token: Option<&str>) -> Result<(), SimError> {
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, kubeconfig_yaml(server, token, "default"))?;
    Ok(())
}
