//! Where each file of a run lives inside its directory.

use std::path::{Path, PathBuf};

use crate::component::Component;

/// The paths of one run directory.
#[derive(Clone, Debug)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    /// The layout under `root`.
    pub fn new(root: &Path) -> Layout {
        Layout {
            root: root.to_path_buf(),
        }
    }

    /// The run directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Certificates and keys.
    pub fn pki(&self) -> PathBuf {
        self.root.join("pki")
    }

    /// The CA certificate.
    pub fn ca_cert(&self) -> PathBuf {
        self.pki().join("ca.crt")
    }

    /// The CA key (the controller manager's CSR signer uses it).
    pub fn ca_key(&self) -> PathBuf {
        self.pki().join("ca.key")
    }

    /// The API server's serving certificate.
    pub fn apiserver_cert(&self) -> PathBuf {
        self.pki().join("apiserver.crt")
    }

    /// The API server's serving key.
    pub fn apiserver_key(&self) -> PathBuf {
        self.pki().join("apiserver.key")
    }

    /// The service-account signing key (private).
    pub fn service_account_key(&self) -> PathBuf {
        self.pki().join("sa.key")
    }

    /// The service-account verification key (public).
    pub fn service_account_pub(&self) -> PathBuf {
        self.pki().join("sa.pub")
    }

    /// Client certificates, one pair per identity.
    pub fn users(&self) -> PathBuf {
        self.pki().join("users")
    }

    /// Kubeconfigs, one per identity.
    pub fn kubeconfigs(&self) -> PathBuf {
        self.root.join("kubeconfigs")
    }

    /// etcd's data.
    pub fn etcd_data(&self) -> PathBuf {
        self.root.join("etcd")
    }

    /// Component logs.
    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// The log of `component`.
    pub fn log(&self, component: Component) -> PathBuf {
        self.logs().join(format!("{}.log", component.binary()))
    }

    /// Where `component` writes self-signed serving certificates of its own.
    pub fn serving_dir(&self, component: Component) -> PathBuf {
        self.root.join("serving").join(component.binary())
    }

    /// kubectl's discovery cache (not ~/.kube/cache: one entry per port would pile up there).
    pub fn kubectl_cache(&self) -> PathBuf {
        self.root.join("kubectl-cache")
    }
}
