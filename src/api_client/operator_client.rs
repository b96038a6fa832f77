//! The client step of start-up: where the cluster configuration comes from (`--kubeconfig`,
//! else `KUBECONFIG`, the in-cluster service account, `~/.kube/config`), and the timeouts and
//! retry policy nmo's kube client runs with.

use std::path::Path;
use std::time::Duration;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use super::{ApiClientError, ApiClientOptions, ConnectionCount};
use crate::options::OperatorOptions;

/// How long connecting to the API server may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the client waits for any answer (a response, or the next bytes of a watch) before
/// it gives the connection up: a backstop for calls nothing else bounds (the listings inside
/// the watches). Longer than a watch may stay silent (the server ends a watch after its
/// `timeoutSeconds`, and the watch has its own idle timeout 5 s later), so it never
/// breaks a healthy watch; every call of the actors, of the leader election and of the
/// webhook has a much shorter deadline of its own.
pub const READ_TIMEOUT: Duration = crate::options::MAX_API_CALL_TIMEOUT;

/// Why no cluster configuration could be had.
#[derive(Debug, thiserror::Error)]
pub enum ClusterConfigError {
    /// `--kubeconfig` names a file that cannot be read or parsed.
    #[error("--kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// What kube said.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// Neither a kubeconfig nor the in-cluster configuration is usable.
    #[error(
        "cannot find a cluster configuration (set --kubeconfig or KUBECONFIG, or run in a pod): {0}"
    )]
    Infer(#[source] kube::config::InferConfigError),
}

/// The cluster configuration: the file `kubeconfig` names (its current context), else what
/// kube infers (`KUBECONFIG`, `~/.kube/config`, then the pod's service account).
pub async fn cluster_config(kubeconfig: Option<&Path>) -> Result<kube::Config, ClusterConfigError> {
    let Some(path) = kubeconfig else {
        return kube::Config::infer()
            .await
            .map_err(ClusterConfigError::Infer);
    };
    let file_error = |source| ClusterConfigError::Kubeconfig {
        path: path.display().to_string(),
        source,
    };
    let file = Kubeconfig::read_from(path).map_err(file_error)?;
    kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(file_error)
}

/// The configuration nmo's kube client runs with. kube's built-in retry is off: it resends a
/// 429 up to 15 times with growing waits, so a refusal by a PodDisruptionBudget would hang
/// inside one call for minutes, holding an eviction slot, and the eviction actor's own
/// per-budget backoff (which decides when to ask again) would never start. Connect and read
/// timeouts are set (see [`CONNECT_TIMEOUT`], [`READ_TIMEOUT`]); the read timeout counts from
/// each request sent, not from when its pooled connection went idle.
pub fn client_config(mut config: kube::Config) -> kube::Config {
    config.default_retry = false;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    config.reset_reader_on_write = true;
    config
}

/// The client the operator runs with, and the count of its connections when it was built by
/// [`client`] (a client built elsewhere, by a test say, has none to report).
pub struct OperatorClient {
    /// The client.
    pub client: Client,
    /// Its connections, reported as `nmo_kube_api_connections_*`.
    pub connections: Option<ConnectionCount>,
    /// The API server's `host:port`, for the `host` label of client-go's request metrics
    /// (empty when unknown).
    pub host: String,
}

impl From<Client> for OperatorClient {
    fn from(client: Client) -> Self {
        OperatorClient {
            client,
            connections: None,
            host: String::new(),
        }
    }
}

/// The kube client nmo runs with (see [`client_config`]): requests and watches share a few
/// HTTP/2 connections when the server offers HTTP/2 (`api_client`).
pub fn client(
    config: kube::Config,
    options: &OperatorOptions,
) -> Result<OperatorClient, ApiClientError> {
    let config = client_config(config);
    let host = config
        .cluster_url
        .authority()
        .map(ToString::to_string)
        .unwrap_or_default();
    let client_options = ApiClientOptions {
        http2_prior_knowledge: options.kube_api_http2_prior_knowledge,
        max_calls_in_flight: super::call_limit::calls_in_flight(options.max_evictions_in_flight),
        ..ApiClientOptions::default()
    };
    let connections = ConnectionCount::default();
    let client = super::client(&config, &client_options, connections.clone())?;
    Ok(OperatorClient {
        client,
        connections: Some(connections),
        host,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_has_connect_and_read_timeouts_that_spare_long_watches() {
        let config = client_config(kube::Config::new(
            "https://example.invalid".parse().expect("a URI"),
        ));
        assert!(!config.default_retry);
        assert_eq!(config.connect_timeout, Some(CONNECT_TIMEOUT));
        // kube-runtime's watchers ask the server to end a watch after 290 s and give up on a
        // silent one 5 s later: the read timeout must leave them that.
        assert!(
            config
                .read_timeout
                .is_some_and(|t| t > Duration::from_secs(295))
        );
        assert!(config.reset_reader_on_write);
    }

    #[tokio::test]
    async fn a_kubeconfig_flag_is_read_and_a_broken_one_named() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("config");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters: [{name: k, cluster: {server: 'https://10.1.2.3:6443'}}]\n\
             users: [{name: u, user: {token: t}}]\n\
             contexts: [{name: c, context: {cluster: k, user: u, namespace: ops}}]\n",
        )
        .expect("written");
        let config = cluster_config(Some(&path)).await.expect("a config");
        assert_eq!(config.cluster_url.to_string(), "https://10.1.2.3:6443/");
        assert_eq!(config.default_namespace, "ops");

        let missing = dir.path().join("missing");
        let error = cluster_config(Some(&missing)).await.expect_err("no file");
        assert!(
            error
                .to_string()
                .starts_with(&format!("--kubeconfig {}", missing.display())),
            "{error}"
        );
    }
}
