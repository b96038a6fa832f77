//! Why the demo (or a benchmark scenario) could not run to the end.

use std::time::Duration;

/// A failed demo or benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The simulated cluster did not start or failed.
    #[error("simulated cluster: {0}")]
    Sim(#[from] nmo_sim::SimError),
    /// A NodeMaintenance could not be created.
    #[error("cannot create NodeMaintenance {name}: {source}")]
    Create {
        /// Its name.
        name: String,
        /// The API's answer.
        #[source]
        source: kube::Error,
    },
    /// A NodeMaintenance could not be deleted.
    #[error("cannot delete NodeMaintenance {name}: {source}")]
    Delete {
        /// Its name.
        name: String,
        /// The API's answer.
        #[source]
        source: kube::Error,
    },
    /// The operator stopped with an error while the demo needed it.
    #[error("the operator stopped: {0}")]
    Operator(String),
    /// Something did not happen in time.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        after: Duration,
    },
    /// The options make no sense together.
    #[error("invalid options: {0}")]
    Options(String),
    /// A file (the kubeconfig) or a child process could not be handled.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}
