//! How a command run by a person (`nmo plan`, `nmo uninstall`) reaches the cluster: the
//! kubeconfig as kubectl finds it, or the one and the context named on the command line.

use std::path::PathBuf;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// The flags that choose the cluster.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClusterArgs {
    /// The kubeconfig file (default: as kubectl: KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long)]
    pub context: Option<String>,
}

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ClusterAccessError {
    /// The kubeconfig could not be read or used.
    #[error("cannot use the kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    /// No cluster configuration was found.
    #[error("cannot find a cluster configuration: {0}")]
    InferConfig(#[from] kube::config::InferConfigError),
    /// The client could not be built.
    #[error("cannot build a client: {0}")]
    Client(#[source] kube::Error),
}

impl ClusterArgs {
    /// A client for the chosen cluster.
    pub async fn client(&self) -> Result<Client, ClusterAccessError> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = match &self.kubeconfig {
            Some(path) => {
                let kubeconfig = Kubeconfig::read_from(path)?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?
            }
            None if self.context.is_some() => kube::Config::from_kubeconfig(&options).await?,
            None => kube::Config::infer().await?,
        };
        Client::try_from(config).map_err(ClusterAccessError::Client)
    }
}
