//! Client configuration for one identity: a kubeconfig file (for kubectl, the controller
//! manager, the scheduler, or nmo in a child process) and the same as a `kube::Config`.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::error::{Error, Result};

/// Where an identity's certificate and key are.
#[derive(Clone, Debug)]
pub struct Credentials {
    /// The client certificate, PEM.
    pub cert: PathBuf,
    /// Its private key, PEM.
    pub key: PathBuf,
}

/// The kubeconfig text for `server` trusting `ca` and presenting `credentials`.
pub fn kubeconfig_yaml(server: &str, ca: &Path, credentials: &Credentials) -> Result<String> {
    let document = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "envtest", "cluster": {
            "server": server,
            "certificate-authority": ca,
        }}],
        "users": [{"name": "envtest", "user": {
            "client-certificate": credentials.cert,
            "client-key": credentials.key,
        }}],
        "contexts": [{"name": "envtest", "context": {
            "cluster": "envtest",
            "user": "envtest",
            "namespace": "default",
        }}],
        "current-context": "envtest",
    });
    serde_yaml::to_string(&document).map_err(|source| Error::Yaml {
        context: "writing a kubeconfig".into(),
        source,
    })
}

/// Writes the kubeconfig to `path` (private to this user: it points at a private key).
pub fn write(path: &Path, server: &str, ca: &Path, credentials: &Credentials) -> Result<()> {
    let text = kubeconfig_yaml(server, ca, credentials)?;
    crate::files::write_private(path, text.as_bytes())
}

/// The kube client configuration for `server`, trusting the CA `ca_der`, presenting
/// `credentials`.
pub fn client_config(
    server: &str,
    ca_der: &[u8],
    credentials: &Credentials,
) -> Result<kube::Config> {
    let url: http::Uri = server.parse().map_err(|error: http::uri::InvalidUri| {
        Error::io(
            format!("the API server's address {server}"),
            std::io::Error::other(error.to_string()),
        )
    })?;
    let mut config = kube::Config::new(url);
    config.root_cert = Some(vec![ca_der.to_vec()]);
    config.auth_info = kube::config::AuthInfo {
        client_certificate: Some(credentials.cert.display().to_string()),
        client_key: Some(credentials.key.display().to_string()),
        ..kube::config::AuthInfo::default()
    };
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubeconfig_names_server_ca_and_credentials() {
        let credentials = Credentials {
            cert: "/d/u.crt".into(),
            key: "/d/u.key".into(),
        };
        let text = kubeconfig_yaml(
            "https://127.0.0.1:6443",
            Path::new("/d/ca.crt"),
            &credentials,
        )
        .unwrap();
        let parsed = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        let cluster = parsed.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(cluster.certificate_authority.as_deref(), Some("/d/ca.crt"));
        let user = parsed.auth_infos[0].auth_info.as_ref().unwrap();
        assert_eq!(user.client_certificate.as_deref(), Some("/d/u.crt"));
        assert_eq!(parsed.current_context.as_deref(), Some("envtest"));
    }
}
